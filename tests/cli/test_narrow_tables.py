"""The main tables fit an 80-column terminal: no line is longer, no cell is cut with an
ellipsis, and no row wraps onto a second line (a wrapped row starts with a blank cell)."""

from pathlib import Path

import pytest
from typer.testing import CliRunner

from servecap.cli.app import app

CHAT = (Path(__file__).resolve().parents[2] / "workloads" / "chat.yaml").read_text()
H100 = ("--device", "h100-80gb")


@pytest.fixture(scope="module")
def workload(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("w") / "w.yaml"
    path.write_text(CHAT.replace("num_requests: 2000", "num_requests: 60"))
    return path


def _wrapped_rows(text: str) -> list[str]:
    rows = [line for line in text.splitlines() if line.startswith("│")]
    return [line for line in rows if not line.split("│")[1].strip()]


@pytest.mark.parametrize("args", [
    ("plan", "teaching-7b"),
    ("plan", "teaching-7b", "--context", "1000000", "--runtime-peak", "3GiB"),
    ("plan", "qwen2.5-7b", "--device", "l40s-48gb", "--lengths", "512,2048,8192,8192,30000"),
    ("plan", "gemma-2-9b-it", "--device", "40GiB", "--context", "8192", "--concurrency", "4"),
    ("plan", "llama-3.1-8b", *H100, "--context", "4096", "-tp", "2", "--engine", "vllm"),
    ("fit", "llama-3.1-8b", "--device", "l4-24gb", "--concurrency", "6"),
    ("simulate", "teaching-7b", *H100, "--policy", "static", "--policy", "continuous"),
    ("simulate", "teaching-7b", *H100, "--percentiles", "50,90,99,99.9"),
    ("sweep", "teaching-7b", *H100, "--num-rates", "3", "--slo-tpot", "50ms"),
])
def test_main_tables_fit_80_columns(workload, args) -> None:
    if args[0] in ("simulate", "sweep"):
        args = (*args, "--workload", str(workload))
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "80"})
    assert result.exit_code in (0, 1), result.output
    out = result.stdout
    assert "┏" in out  # a table was drawn
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "…" not in out
    assert _wrapped_rows(out) == [], out
