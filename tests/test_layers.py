"""The import direction holds: ledger is stdlib-only; torch lives in runtime/; cli is on top."""

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
THIRD_PARTY_HEAVY = {"torch", "pandas", "openpyxl", "numpy", "pynvml", "safetensors"}
# Which servecap packages each folder may import (one direction: cli -> middle -> ledger).
ALLOWED_INTERNAL = {
    "ledger": {"ledger"},
    "model_configs": {"ledger", "model_configs"},
    "sim": {"ledger", "sim"},
    "workbooks": {"ledger", "workbooks", "model_configs", "sim"},
    "runtime": {"ledger", "runtime", "model_configs", "sim"},
    "load": {"ledger", "sim", "model_configs", "load"},
    # a Scenario is below cli/ and above ledger/ and sim/: the library runs without the CLI;
    # a verification runs the runtime (imported when one runs: see below)
    "scenario": {"ledger", "model_configs", "sim", "scenario", "runtime"},
}
CLI_ONLY = {"typer", "click", "rich"}


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def _files(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


@pytest.mark.parametrize("path", _files("ledger"), ids=lambda p: p.name)
def test_ledger_imports_only_the_standard_library(path: Path) -> None:
    for name in _imports(path):
        top = name.split(".")[0]
        assert top in sys.stdlib_module_names, f"{path.name} imports {name}"


@pytest.mark.parametrize("folder", sorted(ALLOWED_INTERNAL))
def test_internal_imports_point_down(folder: str) -> None:
    for path in _files(folder):
        for name in _imports(path):
            parts = name.split(".")
            if parts[0] == "servecap" and len(parts) > 1:
                assert parts[1] in ALLOWED_INTERNAL[folder], f"{path} imports {name}"


def test_scenario_does_not_need_the_cli_libraries() -> None:
    for path in _files("scenario"):
        tops = {name.split(".")[0] for name in _imports(path)}
        assert not tops & CLI_ONLY, f"{path} imports {tops & CLI_ONLY}"


def test_scenario_imports_the_runtime_only_when_a_verification_runs() -> None:
    for path in _files("scenario"):
        tree = ast.parse(path.read_text())
        top = {n.module for n in tree.body if isinstance(n, ast.ImportFrom) and n.module}
        assert not {m for m in top if m.startswith("servecap.runtime")}, path
        if path.name != "verification.py":
            assert not {n for n in _imports(path) if n.startswith("servecap.runtime")}, path


@pytest.mark.parametrize("folder", ["ledger", "model_configs", "sim", "workbooks", "cli",
                                    "load", "scenario"])
def test_torch_is_imported_only_in_runtime(folder: str) -> None:
    for path in _files(folder):
        heavy = {n.split(".")[0] for n in _imports(path)} & {"torch", "pynvml"}
        assert not heavy, f"{path} imports {heavy}"
