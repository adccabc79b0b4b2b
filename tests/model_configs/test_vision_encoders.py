"""The vision towers vLLM loads beside Gemma-3 and Gemma-4 (ledger/encoders.py), counted from
the fixtures' official config.json files, against the parameters of transformers' own tower
modules built from the same vision_config (on the meta device: no weights, no network)."""

import json
from pathlib import Path

import pytest

from servecap.ledger.encoders import SIGLIP, Encoder, encoder_params
from servecap.model_configs.encoders import read_encoder
from servecap.model_configs.loader import load_model

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
GEMMAS = ["google--gemma-3-27b-it", "google--gemma-3-4b-it", "google--gemma-4-26B-A4B"]


def _config(name: str) -> dict:
    return json.loads((CONFIGS / name / "config.json").read_text())


@pytest.mark.parametrize("name", GEMMAS)
def test_the_tower_has_transformers_parameter_count(name):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    data = _config(name)
    enc, note = read_encoder(data)
    config = transformers.AutoConfig.from_pretrained(CONFIGS / name)
    with torch.device("meta"):
        tower = transformers.AutoModel.from_config(config.vision_config)
    params = sum(p.numel() for p in tower.parameters())
    # the projector into the text hidden size (Gemma-3's mm_input_projection_weight and
    # mm_soft_emb_norm; Gemma-4's embedding_projection) and Gemma-4's standardizing buffers
    h, text = enc.hidden_size, data["text_config"]["hidden_size"]
    extra = h * text + (h if enc.kind == SIGLIP else 2 * h)
    assert encoder_params(enc)[0] == params + extra
    assert f"{params + extra:,} parameters" in note


def test_siglip_splits_its_linear_layers_over_tensor_parallel_ranks():
    enc, _ = read_encoder(_config("google--gemma-3-27b-it"))
    whole, split = encoder_params(enc)
    rank, _ = encoder_params(enc, 4)
    assert split == 27 * (4 * 1152 * 1152 + 2 * 1152 * 4304 + 3 * 1152 + 4304)
    assert rank == whole - split + -(-split // 4)


def test_the_plan_counts_the_tower_for_vllm_and_says_so():
    spec = load_model(str(CONFIGS / "google--gemma-3-27b-it")).spec
    assert spec.encoder is not None and spec.encoder.kind == SIGLIP
    assert any("vision_config read as Gemma3ForConditionalGeneration" in n for n in spec.notes)
    assert not any(n.startswith("weights count the language model only") for n in spec.notes)


def test_a_tower_not_read_keeps_its_note():
    """A pooling head (vision_use_head) is not counted: the tower is left out, and said."""
    data = _config("google--gemma-3-27b-it")
    data["vision_config"]["vision_use_head"] = True
    assert read_encoder(data) == (None, "")
    assert read_encoder({"architectures": ["LlamaForCausalLM"]}) == (None, "")


def test_omitted_fields_take_transformers_defaults_and_are_named():
    data = _config("google--gemma-3-27b-it")
    del data["vision_config"]["patch_size"]
    enc, note = read_encoder(data)
    assert enc.patch_size == 16 and "patch_size not stated" in note
    assert isinstance(enc, Encoder)


def test_vllm_plans_the_encoder_line_inside_its_budget_and_sglang_does_not():
    from typer.testing import CliRunner

    from servecap.cli.app import app

    model = str(CONFIGS / "google--gemma-4-26B-A4B")

    def lines(engine):
        out = CliRunner().invoke(app, ["plan", model, "--device", "a100-80gb", "--engine",
                                       engine, "--context", "8192", "--json"])
        assert out.exit_code in (0, 1), out.output
        report = json.loads(out.stdout)
        return {line["key"]: line["bytes"] for line in report["lines"]}, report
    vllm, report = lines("vllm==0.19.0")
    enc, _ = read_encoder(_config("google--gemma-4-26B-A4B"))
    assert vllm["encoder_weights"] == encoder_params(enc)[0] * 2
    assert "encoder_weights" not in lines("sglang")[0]


def test_llama4_tower_has_transformers_parameter_count_and_closes_the_logged_weights():
    """Llama4VisionModel and Llama4MultiModalProjector as transformers builds them from the
    Scout config (meta device), against the count vLLM's mllama4.py modules hold. On 4 ranks
    its linear layers split: 218,813,120 params x 2 B = 0.41 GiB a rank, the gap between the
    language model's weights and the 0.19.0 log's 'Model loading took 53.12 GiB'
    (tests/fixtures/vllm_logs/v1_llama4_scout_4xh100_planner.log, 0.43 GiB before it)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    name = "meta-llama--Llama-4-Scout-17B-16E-Instruct"
    enc, note = read_encoder(_config(name))
    config = transformers.AutoConfig.from_pretrained(CONFIGS / name)
    from transformers.models.llama4 import modeling_llama4 as llama4
    with torch.device("meta"):
        modules = (llama4.Llama4VisionModel(config.vision_config),
                   llama4.Llama4MultiModalProjector(config))
    params = sum(p.numel() for m in modules for p in m.parameters())
    assert encoder_params(enc)[0] == params == 871_932_416
    assert f"{params:,} parameters" in note
    assert encoder_params(enc, 4)[0] == 218_813_120


@pytest.mark.parametrize(("name", "module", "cls", "count"), [
    ("Qwen--Qwen3-VL-8B-Instruct", "qwen3_vl", "Qwen3VLVisionModel", 576_388_336),
    ("Qwen--Qwen3-VL-30B-A3B-Instruct", "qwen3_vl_moe", "Qwen3VLMoeVisionModel", 538_631_408)])
def test_qwen3_vl_tower_has_transformers_parameter_count(name, module, cls, count):
    """transformers' Qwen3-VL vision model (patch embedding, positions, blocks, the merger and
    the deepstack mergers) from the fixture's vision_config on the meta device, against the count
    vLLM's qwen3_vl.py modules hold; at TP 4 the linear layers split: 138,145,052 params a rank
    of the 30B-A3B, the weights the 0.11.0 TP 4 log loads beyond the language model
    (tests/fixtures/vllm_logs/v1_qwen3vl_30b_a3b_4x3090_pcie_sipeed.log) but 0.22 GiB."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    import importlib
    enc, note = read_encoder(_config(name))
    config = transformers.AutoConfig.from_pretrained(CONFIGS / name)
    modeling = importlib.import_module(f"transformers.models.{module}.modeling_{module}")
    with torch.device("meta"):
        tower = getattr(modeling, cls)._from_config(config.vision_config)
    params = sum(p.numel() for p in tower.parameters())
    assert encoder_params(enc)[0] == params == count
    assert f"{params:,} parameters" in note
    if "30B" in name:
        assert encoder_params(enc, 4)[0] == 138_145_052
