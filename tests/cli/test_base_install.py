"""On the base install (`pip install servecap`, no extras) a command that needs an extra says so
in one line and exits 2. The installed `servecap` console script runs with every module the
base install would not have made unimportable: a sitecustomize blocks each top-level module of
an installed distribution outside the closure of servecap's own requirements (no extras)."""

import subprocess
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
CHAT = str(ROOT / "workloads" / "chat.yaml")
BLOCKER = '''
import sys

BLOCKED = frozenset({blocked!r})


class _NotInstalled:
    """The base install: these distributions are not there."""

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None


sys.meta_path.insert(0, _NotInstalled())
'''


def _closure() -> set[str]:
    """Distributions servecap's base requirements pull in, transitively (no extras)."""
    names, todo = set(), ["servecap"]
    while todo:
        name = todo.pop()
        key = name.lower().replace("_", "-")
        if key in names:
            continue
        names.add(key)
        for line in metadata.requires(name) or []:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return names


def _blocked() -> list[str]:
    base = _closure()
    out = set()
    for module, dists in metadata.packages_distributions().items():
        if module in sys.stdlib_module_names or module == "servecap":
            continue
        if not any(d.lower().replace("_", "-") in base for d in dists):
            out.add(module)
    return sorted(out)


@pytest.fixture(scope="module")
def base_only(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("base-install")
    blocked = _blocked()
    assert {"torch", "openpyxl", "aiohttp", "fastapi"} <= set(blocked)
    (folder / "sitecustomize.py").write_text(BLOCKER.format(blocked=blocked))
    script = Path(sysconfig.get_path("scripts")) / "servecap"
    if not script.exists():
        pytest.skip("the servecap console script is not installed")
    return {"script": str(script), "env": {"PYTHONPATH": str(folder), "COLUMNS": "100",
                                           "PATH": "/usr/bin:/bin"}}


def _run(base_only: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([base_only["script"], *args], capture_output=True, text=True,
                          env=base_only["env"], timeout=120)


@pytest.mark.parametrize(("args", "line"), [
    (("verify", "tiny-llama", "--device", "cpu"),
     "verify needs torch: pip install 'servecap[runtime]'"),
    (("serve", "tiny-llama"),
     "serve needs torch, fastapi, uvicorn: pip install 'servecap[runtime,serve]'"),
    (("load", "http://127.0.0.1:9/v1", "--model", "m", "--workload", CHAT),
     "load needs aiohttp: pip install 'servecap[serve]'"),
    (("plan", "teaching-7b", "--xlsx", "never-written.xlsx"),
     "a workbook needs openpyxl: pip install 'servecap[excel]'"),
])
def test_a_missing_extra_is_one_line_and_exit_2(base_only, args, line) -> None:
    out = _run(base_only, *args)
    assert (out.returncode, out.stderr) == (2, f"servecap: error: {line}\n")
    assert out.stdout == ""


def test_the_base_install_still_plans(base_only) -> None:
    """The blocker takes away only what the extras bring: plan and --help run."""
    out = _run(base_only, "plan", "teaching-7b")
    assert out.returncode == 0, out.stderr
    assert "memory-only ceiling: 39 requests" in out.stdout
    assert _run(base_only, "verify", "--help").returncode == 0
