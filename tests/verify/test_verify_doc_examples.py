"""docs/verify.md's examples run as written from the repository root: each `servecap` line
the CPU can run, in the page's order in one folder (the simulate line reads the cal.json the
verify line before it writes), exits 0. `--trace requests.csv` and `--workload load.yaml`
named files nothing ships and exited 2; they now name workloads/trace.csv."""

import shlex
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from servecap.cli.app import app

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "cli"))
from test_readme import examples  # noqa: E402  (the README test's parser of a doc's lines)

DOC = (ROOT / "docs" / "verify.md").read_text(encoding="utf-8")
HELP_EXAMPLE = "servecap verify tiny-llama --trace workloads/trace.csv --concurrency 8"


def _on_the_cpu(example: str) -> bool:
    return "cuda" not in example


def test_the_page_names_shipped_files_only() -> None:
    for example in examples(DOC):
        for arg in shlex.split(example):
            if arg.startswith(("workloads/", "bench/")):
                assert (ROOT / arg).exists(), (example, arg)
    assert any("--trace workloads/trace.csv" in e for e in examples(DOC))
    assert any(e.startswith("servecap simulate") for e in examples(DOC))


def test_the_help_example_names_the_shipped_trace() -> None:
    result = CliRunner(env={"COLUMNS": "120"}).invoke(app, ["verify", "--help"])
    assert HELP_EXAMPLE in result.stdout and "requests.csv" not in result.stdout


@pytest.mark.slow
def test_the_pages_examples_run_as_written(tmp_path, monkeypatch) -> None:
    (tmp_path / "workloads").symlink_to(ROOT / "workloads")
    (tmp_path / "bench").symlink_to(ROOT / "bench")
    monkeypatch.chdir(tmp_path)
    ran = []
    for example in dict.fromkeys(examples(DOC)):  # the measured block repeats the first line
        if not _on_the_cpu(example):
            continue
        result = CliRunner().invoke(app, shlex.split(example)[1:])
        # the two-rank probe's transients vary from run to run (13.60-14.41 MB of tensors at
        # its peak over three runs on 2026-12-01, shared 2-core VM, no GPU) and now and then
        # one 2 MiB step buffer is refused at the 16 MiB edge: that run is a finding (exit
        # 1), not an example that fails to run (exit 2)
        allowed = (0, 1) if "--tensor-parallel-size" in example else (0,)
        assert result.exit_code in allowed, (example, result.output)
        ran.append(example)
    assert len(ran) >= 6, ran
    assert (tmp_path / "cal.json").exists() and (tmp_path / "runs.csv").exists()
