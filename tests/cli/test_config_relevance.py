"""Only the fields a ledger line reads are validated: one that changes memory and is not
understood is refused by name; the irrelevant ones never refuse and are listed by -v."""

import json
from pathlib import Path

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"


def write(tmp_path: Path, name: str, **changes) -> Path:
    data = json.loads((CONFIGS / name / "config.json").read_text())
    data.update(changes)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    return path


def test_an_unread_memory_field_is_refused_by_name(run, tmp_path: Path) -> None:
    path = write(tmp_path, "Qwen--Qwen3-8B", hybrid_override_pattern="M*" * 18)
    result = run("plan", path, "--device", "h100-80gb")
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "hybrid_override_pattern" in lines[0] and "qwen3" in lines[0]


def test_kv_sharing_is_planned_for_gemma4_and_refused_elsewhere(run, tmp_path: Path) -> None:
    """Gemma4Attention (vLLM v0.21.0): the last num_kv_shared_layers layers read the last
    earlier layer of their type and cache nothing; another family's class never reads it."""
    data = json.loads((CONFIGS / "google--gemma-4-26B-A4B" / "config.json").read_text())
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    whole = json.loads(run("plan", path, "--device", "h100-80gb", "--json").stdout)
    data["text_config"]["num_kv_shared_layers"] = 10
    path.write_text(json.dumps(data))
    shared = json.loads(run("plan", path, "--device", "h100-80gb", "--json").stdout)
    layers = shared["layers"]
    assert [r["kv_source"] is not None for r in layers] == [i >= 20 for i in range(30)]
    assert all(layers[r["kv_source"]]["kind"] == r["kind"] for r in layers[20:])
    assert shared["kv_bytes_per_token"] == sum(r["kv_bytes_per_token"]
                                               for r in whole["layers"][:20])
    other = write(tmp_path, "Qwen--Qwen3-8B", num_kv_shared_layers=4)
    result = run("plan", other, "--device", "h100-80gb")
    assert result.exit_code == 2 and "num_kv_shared_layers" in result.output


def test_irrelevant_fields_never_refuse_and_are_listed_by_verbose(run) -> None:
    path = CONFIGS / "nvidia--Nemotron-H-56B-Base-8K" / "config.json"
    assert "Infinity" in path.read_text()  # time_step_limit: [0.0, Infinity]
    result = run("plan", path, "--device", "h100-80gb", "--context", "8192", "-v")
    assert result.exit_code in (0, 1)
    assert "ignored as irrelevant to memory" in result.stderr
    assert "time_step_limit" in result.stderr and "rms_norm_eps" in result.stderr


def test_a_malformed_read_field_still_fails_closed(run, tmp_path: Path) -> None:
    path = write(tmp_path, "Qwen--Qwen3-8B", num_key_value_heads=float("inf"))
    result = run("plan", path, "--device", "h100-80gb")
    assert result.exit_code == 2 and "num_key_value_heads" in result.output


def test_kimi_k2_is_planned_as_deepseek_v3_and_says_so(run) -> None:
    path = CONFIGS / "moonshotai--Kimi-K2-Instruct" / "config.json"
    result = run("plan", path, "--device", "h100-80gb", "--json")
    assert result.exit_code in (0, 1)
    out = json.loads(result.stdout)
    assert out["kv_bytes_per_token"] == 61 * (512 + 64) * 2
    assert any("kimi_k2 read as deepseek_v3" in note for note in out["notes"])


def test_a_hybrid_workbook_carries_its_state_line_as_a_formula(run, tmp_path: Path) -> None:
    openpyxl = __import__("pytest").importorskip("openpyxl")
    from servecap.workbooks.names import cell_of

    out = tmp_path / "plan.xlsx"
    result = run("plan", "qwen3.6-35b-a3b", "--device", "h100-80gb", "--xlsx", out)
    assert result.exit_code in (0, 1) and out.exists(), result.output
    book = openpyxl.load_workbook(out)
    assert cell_of(book, "state_cache_bytes").value == "=requests*state_bytes_per_request"
    assert "cache_bytes_per_request" in cell_of(book, "memory_ceiling_requests").value
