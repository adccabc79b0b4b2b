"""README.md's examples name real commands with flags those commands take, and its doc links
point at files: a renamed flag or a moved doc fails here, not in a new user's shell."""

import re
import shlex
from pathlib import Path

import pytest

from servecap.cli.app import COMMANDS, load_command

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def examples(text: str = README) -> list[str]:
    """Every `servecap ...` line of a code block (README.md's, or another doc's text),
    continuation lines joined, comments cut."""
    found, pending = [], ""
    for line in text.splitlines():
        match = re.match(r"^(?: {4,}|\$ )(servecap .*)$", line)  # a list item: deeper
        if pending:
            text = pending + line.strip()
        elif match:
            text = match.group(1)
        else:
            continue
        pending = text[:-1] + " " if text.endswith("\\") else ""
        if not pending:
            found.append(re.split(r"\s+#", text)[0].strip())
    return found


def test_the_readme_has_examples_for_every_command() -> None:
    named = {shlex.split(cmd)[1] for cmd in examples()}
    assert set(COMMANDS) - {"speculate"} <= named, set(COMMANDS) - named


@pytest.mark.parametrize("example", examples())
def test_each_example_parses(example: str) -> None:
    argv = shlex.split(example)[1:]
    assert argv[0] in COMMANDS, argv[0]
    command = load_command(argv[0])
    command.make_context(argv[0], argv[1:], resilient_parsing=True)  # unknown flags raise
    own = argv[1:argv.index("--")] if "--" in argv else argv[1:]  # after --: a vLLM line
    flags = {a.split("=")[0] for a in own if a.startswith("-")}
    known = {opt for p in command.params for opt in (*p.opts, *p.secondary_opts)}
    assert flags <= known, flags - known


def test_doc_links_resolve() -> None:
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README):
        if not target.startswith("http"):
            assert (ROOT / target).exists(), target


def _quick(example: str) -> bool:
    """The examples that run here in seconds, without a network, a GPU or a server: every
    plan, fit, workbook, catalog, cost and reconcile line and the workbook block's simulate
    (the long simulations, search and verify run in their own tests)."""
    argv = shlex.split(example)[1:]
    if argv[0] in ("serve", "load", "verify", "search", "sweep") or "cuda:0" in argv:
        return False
    if any(re.fullmatch(r"[\w.-]+/[\w.-]+", a) and not Path(a).exists() for a in argv[1:2]):
        return False  # a Hub id: needs the network or its cache
    return argv[0] != "simulate" or "capacity.xlsx" in argv or "--save-scenario" in argv


def test_the_readme_examples_run_as_written(tmp_path, monkeypatch) -> None:
    """Each quick example, in the README's order in one folder (a later line reads the file an
    earlier one wrote: chat.yaml, capacity.xlsx), exits 0 or 1 (1: the answer 'does not fit'
    or 'does not start'), never 2. The workbook block's `simulate --scenario capacity.xlsx
    --rate 8` exited 2: its plan was on a bare 40GiB, which has no bandwidth, and a plan's
    workbook records no workload."""
    from typer.testing import CliRunner

    from servecap.cli.app import app

    (tmp_path / "workloads").symlink_to(ROOT / "workloads")
    (tmp_path / "docs").symlink_to(ROOT / "docs")  # docs/packs/*.yaml
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "fixtures").symlink_to(ROOT / "tests" / "fixtures")
    monkeypatch.chdir(tmp_path)
    ran = []
    for example in examples():
        if _quick(example):
            result = CliRunner().invoke(app, shlex.split(example)[1:])
            assert result.exit_code in (0, 1), (example, result.output)
            ran.append(shlex.split(example)[1])
    assert {"plan", "fit", "workbook", "simulate", "reconcile", "cost"} <= set(ran)
