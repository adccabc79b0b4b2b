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
