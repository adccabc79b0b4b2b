"""The runtime builds the hybrid families it runs and refuses, by name and in one line, every
kind or family it does not run yet: nothing runs wrong."""

from pathlib import Path

import pytest

from servecap.ledger.errors import SpecError
from servecap.ledger.plan import build_plan
from servecap.ledger.serve import ServeSpec
from servecap.model_configs import load_model

torch = pytest.importorskip("torch")
from servecap.runtime.model import Decoder, check_buildable, with_num_layers  # noqa: E402

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"


def _spec(name: str):
    return load_model(str(CONFIGS / name / "config.json")).spec


@pytest.mark.parametrize(("name", "named"), [
    ("nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "moe"),  # Mamba-2 runs; its E blocks not
    ("Qwen--Qwen3.5-27B", "qwen3_5_text"),  # another projection layout of gated DeltaNet
    ("Qwen--Qwen3.6-35B-A3B", "qwen3_5_moe_text"),
    ("meta-llama--Llama-4-Scout-17B-16E-Instruct", "chunked"),
    ("deepseek-ai--DeepSeek-V3.2", "index_head_dim"),
    ("google--gemma-4-26B-A4B", "global_head_dim"),
    ("openai--gpt-oss-20b", "mxfp4"),  # its sinks and experts run; MXFP4 weights do not
    # issue 37's families: each refused by the field that asks for what the runtime lacks
    ("LiquidAI--LFM2.5-VL-1.6B", "conv"),
    ("google--gemma-4-E2B-it", "num_kv_shared_layers"),
    ("nvidia--Llama-3_3-Nemotron-Super-49B-v1", "block_configs"),
    ("XiaomiMiMo--MiMo-V2-Flash", "v_head_dim"),
    ("poolside--Laguna-XS.2-FP8", "layer shapes"),
    ("LGAI-EXAONE--EXAONE-4.0-32B", "exaone4"),
    ("allenai--Olmo-3.1-32B-Instruct", "olmo3"),
])
def test_each_unrun_kind_is_refused_by_name(name: str, named: str) -> None:
    with pytest.raises(SpecError, match=named) as err:
        check_buildable(_spec(name))
    assert "\n" not in str(err.value)


def test_nemotron_h_builds_with_the_ledgers_weights() -> None:
    """Nemotron-H-56B (Mamba-2, attention and MLP blocks, no experts) builds; its first 8
    blocks on the meta device hold exactly the plan's weights line."""
    spec = with_num_layers(_spec("nvidia--Nemotron-H-56B-Base-8K"), 8)
    assert {"mamba", "full", "none"} <= set(spec.attention.layer_kinds)
    with torch.device("meta"):
        model = Decoder(spec).to(torch.bfloat16)
    serve = ServeSpec(device_bytes=80 << 30, context_tokens=4096, concurrency=1,
                      runtime_peak_bytes=0)
    assert model.weight_bytes == build_plan(spec, serve).line("weights")


@pytest.mark.parametrize("name", ["XiaomiMiMo--MiMo-7B-Base", "Qwen--Qwen3-VL-8B-Instruct",
                                  "Qwen--Qwen2.5-VL-7B-Instruct",
                                  "mistralai--Voxtral-Mini-3B-2507"])
def test_text_decoders_of_families_it_runs_build_with_the_ledgers_weights(name: str) -> None:
    """MiMo (a Qwen2), Qwen3-VL's and Qwen2.5-VL's text decoders, Voxtral's (a Llama): read as
    their text architecture, their first 2 layers build on the meta device with exactly the
    plan's weights line."""
    spec = with_num_layers(_spec(name), 2)
    check_buildable(spec)
    with torch.device("meta"):
        model = Decoder(spec).to(torch.bfloat16)
    serve = ServeSpec(device_bytes=80 << 30, context_tokens=4096, concurrency=1,
                      runtime_peak_bytes=0)
    assert model.weight_bytes == build_plan(spec, serve).line("weights")
