"""plan on a quantized checkpoint: the weights and metadata lines name each format's bytes,
--json adds checkpoint_formats (formats, resident bytes by GPU generation), and vLLM on a GPU
its release refuses the checkpoint on is one line naming what is missing (exit 2)."""

import json
from pathlib import Path

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
GEMMA = CONFIGS / "nvidia--Gemma-4-31B-IT-NVFP4" / "config.json"
QWEN = CONFIGS / "nvidia--Qwen3.6-27B-NVFP4" / "config.json"


def test_the_ledger_names_each_formats_bytes(run) -> None:
    out = json.loads(run("plan", GEMMA, "--device", "b200-180gb", "--context", "8192",
                         "--json").stdout)
    weights, metadata = out["lines"][0]["from"], out["lines"][1]["from"]
    assert "nvfp4: 20,808,990,720 params x 4 bits = 10,404,495,360 B" in weights
    assert "bf16: 9,888,354,620 params x 16 bits = 19,776,709,240 B" in weights
    assert metadata.startswith("nvfp4: 1,300,563,360 B (e4m3 scale per 16 values")
    formats = out["checkpoint_formats"]
    assert [f["format"] for f in formats["formats"]] == ["nvfp4", "bf16"]
    assert formats["checkpoint_bytes"] == out["weights_bytes"] + out["weight_metadata_bytes"]
    rows = {r["generation"]: r for r in formats["resident_by_generation"]}
    assert rows["blackwell"]["kernel_or_refusal"].startswith("nvfp4: native NVFP4")
    assert rows["hopper"]["kernel_or_refusal"].startswith("nvfp4: Marlin W4A16")
    assert rows["volta"]["runs"] is False and rows["volta"]["resident_bytes"] is None
    assert formats["device_generation"] == "blackwell"


def test_vllm_refuses_by_release_and_generation_in_one_line(run) -> None:
    cases = (("a100-80gb", "vllm==0.20", "ModelOptMixedPrecisionConfig.get_min_capability "
              "= 89"), ("h100-80gb", "vllm==0.16", "no modelopt MIXED_PRECISION"),
             ("h100-80gb", "vllm==0.21", "no modelopt W4A16_NVFP4"))
    for device, engine, why in cases:
        result = run("plan", QWEN, "--device", device, "--engine", engine, "--context", "8192")
        assert result.exit_code == 2, result.output
        assert why in result.stderr and len(result.stderr.strip().splitlines()) == 1
    ok = run("plan", QWEN, "--device", "a100-80gb", "--engine", "vllm==0.30", "--context",
             "8192")
    assert ok.exit_code in (0, 1) and "ampere (SM80+, this GPU)" in ok.stdout


def test_an_unquantized_checkpoint_has_no_formats_block(run) -> None:
    out = run("plan", "llama-3.1-8b", "--device", "h100-80gb", "--json")
    assert json.loads(out.stdout)["checkpoint_formats"] is None
