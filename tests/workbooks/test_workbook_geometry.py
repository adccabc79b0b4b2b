"""The workbook names one KV shape per layer kind: a model whose layers of one kind cache
different shapes is refused before a file is written (plan --json still lists them)."""

import json
from pathlib import Path

from typer.testing import CliRunner

from servecap.cli.app import app

NAS = Path(__file__).resolve().parents[1] / "fixtures" / "configs" / \
    "nvidia--Llama-3_3-Nemotron-Super-49B-v1" / "config.json"


def test_mixed_shapes_in_one_kind_are_refused_not_averaged(tmp_path: Path) -> None:
    data = json.loads(NAS.read_text())
    data["block_configs"][1]["attention"]["n_heads_in_group"] = 4  # 16 KV heads, not 8
    config = tmp_path / "mixed" / "config.json"
    config.parent.mkdir()
    config.write_text(json.dumps(data))
    book = tmp_path / "out.xlsx"
    runner = CliRunner()
    result = runner.invoke(app, ["plan", str(config), "--device", "h200", "--xlsx", str(book)])
    assert result.exit_code == 2 and "one shape per layer kind" in result.output
    assert not book.exists()
    listed = json.loads(runner.invoke(app, ["plan", str(config), "--device", "h200",
                                            "--json"]).stdout)["layers"]
    assert {r["kv_heads"] for r in listed if r["kind"] == "full"} == {8, 16}
