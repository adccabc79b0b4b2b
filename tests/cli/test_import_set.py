"""`servecap plan` starts fast: it never imports torch, pandas or openpyxl, nor an HTTP client
(huggingface_hub loads only when a Hub id is resolved)."""

import json
import subprocess
import sys

PROBE = """
import sys
from typer.testing import CliRunner
from servecap.cli.app import app
result = CliRunner().invoke(app, ["plan", "teaching-7b", "--json"])
assert result.exit_code == 0, result.output
heavy = sorted(m for m in ("torch", "pandas", "openpyxl", "numpy", "pynvml", "huggingface_hub",
                           "requests", "httpx", "httpx2", "urllib3") if m in sys.modules)
print(__import__("json").dumps(heavy))
"""


def test_plan_imports_no_heavy_module() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_console_script_runs_as_a_real_process() -> None:
    out = subprocess.run([sys.executable, "-m", "servecap.cli", "plan", "teaching-7b", "--json"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["memory_ceiling_requests"] == 39


JSON_PATH = """
import io, sys, contextlib, json
from servecap.cli import catalog_cmd, plan_cmd, reconcile_cmd
from servecap.cli.inputs import PlanFlags
with contextlib.redirect_stdout(io.StringIO()):
    plan = plan_cmd.plan_from_flags("teaching-7b", PlanFlags())
    catalog_cmd.devices(as_json=True)
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "rich")))
"""


def test_plan_modules_leave_rich_to_the_table_path() -> None:
    """The planning commands load rich only to draw a table; their JSON path never does."""
    out = subprocess.run([sys.executable, "-c", JSON_PATH], capture_output=True, text=True,
                         check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
