"""Every official config.json kept in tests/fixtures/configs plans (exit 0 or 1, never 2) or is
refused naming the vLLM model class it would need. A planned one's geometry is checked layer
by layer against an independent reading written here (official_layers.py: each family's own
fields, as its vLLM model class reads them), and its KV per token, KV per request, fixed state
per request and parameter count against independent counts (transformers' model classes, or
the family's block formula where transformers has none)."""

import json
from pathlib import Path

import pytest
from official_layers import expected_layers, kv_bytes, text_part

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
DIRS = sorted(p.name for p in CONFIGS.iterdir() if (p / "config.json").exists())
CONTEXT, BLOCK, BUDGET = 8192, 16, 8192  # BUDGET: vLLM's max_num_batched_tokens, plan's default
# families servecap does not plan: the vLLM class (vllm/model_executor/models/registry.py at
# v0.21.0) each refusal must name
REFUSED = {
    "deepseek-ai--DeepSeek-V4-Flash": "DeepseekV4ForCausalLM",
    "MiniMaxAI--MiniMax-M3": "MiniMaxM3ForCausalLM",  # no class at v0.21.0
    "stepfun-ai--Step-3.7-Flash": "Step3p7FlashForCausalLM",  # no class at v0.21.0
    "meta-llama--Llama-3.2-90B-Vision-Instruct": "MllamaForConditionalGeneration",  # removed
    "bigcode--starcoder2-7b": "Starcoder2ForCausalLM",
    "internlm--internlm2_5-7b-chat": "InternLM2ForCausalLM",
    "CohereForAI--aya-23-8B": "CohereForCausalLM",
    "openbmb--MiniCPM-2B-sft-bf16": "MiniCPMForCausalLM",
    "stabilityai--stablelm-2-zephyr-1_6b": "StableLmForCausalLM",
    # GLM-4.5V's MoE language model (its vision tower is read: tests/ledger/test_encoder_budget)
    "zai-org--GLM-4.5V": "Glm4vMoeForConditionalGeneration",
}
PLANNED = [d for d in DIRS if d not in REFUSED]
# transformers builds these text decoders with the class of the architecture they are
# (vLLM: Qwen3VLMoe's language model is a Qwen3-MoE, MiMo a Qwen2 without its MTP layers)
AS_FAMILY = {"qwen3_vl_moe_text": "qwen3_moe", "qwen3_vl_text": "qwen3", "qwen2_5_vl": "qwen2",
             "mimo": "qwen2", "phi3_v": "phi3"}


def config(name: str) -> dict:
    """The text decoder's fields; those the file leaves out (google/gemma-3-4b-it states no
    heads) from transformers' config class, as the engines read them."""
    cfg = text_part(json.loads((CONFIGS / name / "config.json").read_text()))
    if "num_attention_heads" in cfg:
        return cfg
    transformers = pytest.importorskip("transformers")
    made = transformers.AutoConfig.for_model(
        cfg["model_type"], **{k: v for k, v in cfg.items() if k != "model_type"}).to_dict()
    return {**{k: made[k] for k in made if k not in cfg}, **cfg}


def slots(cfg: dict, kind: str) -> int:
    """Token slots one 8,192-token request holds in a layer of this kind (16-token blocks) at
    its peak; a sliding layer's is its prefill in flight (vLLM's SlidingWindowSpec: the window
    - 1 + one step's batched tokens, capped at the request, + 1 block, at most its own)."""
    if kind == "sliding":
        window = cfg.get("sliding_window_size") or cfg.get("sliding_window") or 128
        return min(CONTEXT, (-(-min(window - 1 + BUDGET, CONTEXT) // BLOCK) + 1) * BLOCK)
    if kind == "chunked":
        return min(CONTEXT, cfg["attention_chunk_size"])
    return CONTEXT


def transformers_parameters(name: str) -> int:
    """transformers' model class on the meta device: parameters + persistent buffers (what a
    checkpoint stores), built as the architecture the family's text decoder is."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()
    cfg = {k: v for k, v in config(name).items()  # no parameter depends on the rope scaling
           if k not in ("auto_map", "quantization_config", "rope_scaling", "rope_parameters")
           and not k.startswith("_")}
    family = cfg.pop("model_type")
    if family == "kimi_k2":
        made = transformers.DeepseekV3Config(**cfg)
    else:
        made = transformers.AutoConfig.for_model(AS_FAMILY.get(family, family), **cfg)
    made = getattr(made, "text_config", None) or made
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(made)
    state = model.state_dict()
    return sum(p.numel() for p in model.parameters()) + sum(
        b.numel() for key, b in model.named_buffers() if key in state)


def deci_parameters(cfg: dict) -> int:
    """DeciLM (nemotron_nas.py, v0.21.0): embed and lm_head; per block an attention block (q, o
    h x h; k, v kv x d x h; its norm) unless no_op, an FFN (gate, up, down; width the multiple
    of 256 at or above int(2 x ffn_mult x h / 3); its norm) unless no_op; the final norm."""
    h, vocab = cfg["hidden_size"], cfg["vocab_size"]
    heads = cfg["num_attention_heads"]
    total = vocab * h * (1 if cfg.get("tie_word_embeddings") else 2) + h
    for block in cfg["block_configs"]:
        attn, ffn = block["attention"], block["ffn"]
        if not attn["no_op"]:
            kv = heads // attn["n_heads_in_group"]
            total += 2 * h * h + 2 * kv * (h // heads) * h + h
        if not ffn["no_op"]:
            width = int(2 * ffn["ffn_mult"] * h / 3)
            width = -(-width // 256) * 256
            total += 3 * width * h + h
    return total


def reference_parameters(name: str) -> int:
    cfg = config(name)
    if cfg.get("model_type") == "nemotron-nas":
        return deci_parameters(cfg)
    return transformers_parameters(name)


@pytest.mark.parametrize("name", PLANNED)
def test_official_config_plans_with_exact_per_layer_geometry(run, name: str) -> None:
    result = run("plan", CONFIGS / name / "config.json", "--device", "h100-80gb", "--context",
                 str(CONTEXT), "--kv-dtype", "bf16", "--json")
    assert result.exit_code in (0, 1), result.output
    out = json.loads(result.stdout)
    cfg = config(name)
    rows = expected_layers(cfg)
    got = out["layers"]
    assert [r["kind"] for r in got] == [r["kind"] for r in rows]
    assert [r["kv_bytes_per_token"] for r in got] == [kv_bytes(r) for r in rows]
    assert [r["kv_source"] for r in got] == [r["source"] for r in rows]
    assert [r["state_bytes"] for r in got] == [r["state"] for r in rows]
    assert out["kv_bytes_per_token"] == sum(kv_bytes(r) for r in rows)
    assert out["kv_bytes_per_request"] == sum(slots(cfg, r["kind"]) * kv_bytes(r) for r in rows)
    assert out["state_bytes_per_request"] == sum(r["state"] for r in rows)
    assert out["num_parameters"] == reference_parameters(name)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_unplanned_family_is_refused_naming_its_vllm_class(run, name: str) -> None:
    result = run("plan", CONFIGS / name / "config.json", "--device", "h100-80gb")
    assert result.exit_code == 2
    message = result.output
    assert "model_type" in message and REFUSED[name] in message and "Traceback" not in message


def test_every_family_of_the_survey_has_a_fixture() -> None:
    families = ("Llama-4-Scout", "Llama-4-Maverick", "Kimi-K2", "DeepSeek-V3.2", "GLM-5",
                "Qwen3-Next", "Qwen3.5", "Qwen3.6", "Nemotron-H", "Nemotron-3-Nano",
                "MiniMax-M2.5", "gemma-4", "DeepSeek-V3.1", "gpt-oss-120b", "Llama-3.1-405B",
                "gemma-3-27b-it", "phi-4", "Devstral-Small-2", "Nemotron-Super-49B",
                "gemma-4-E2B", "LFM2", "MiMo-V2-Flash", "EXAONE-4.0", "Olmo-3", "Qwen3-VL",
                "Laguna")
    assert all(any(f in d for d in DIRS) for f in families)
    assert all((CONFIGS / d / "SOURCE.md").exists() for d in DIRS)
    assert len(DIRS) >= 65  # 35 before issue 37, 30 added with it


TOTALS = sorted(d for d in DIRS if (CONFIGS / d / "index_total_size.json").exists())


@pytest.mark.parametrize("name", TOTALS)
def test_checkpoint_weight_bytes_equal_the_published_total_size(run, name: str) -> None:
    """weights + weight metadata (scales) of the checkpoint as published: the safetensors index
    metadata.total_size kept beside the config (index_total_size.SOURCE.md names its source)."""
    published = json.loads((CONFIGS / name / "index_total_size.json").read_text())
    result = run("plan", CONFIGS / name / "config.json", "--device", "h100-80gb", "--context",
                 str(CONTEXT), "--json")
    out = json.loads(result.stdout)
    assert out["weights_bytes"] + out["weight_metadata_bytes"] == \
        published["metadata"]["total_size"]
    assert (CONFIGS / name / "index_total_size.SOURCE.md").exists()


def test_some_fixtures_carry_their_published_total() -> None:
    assert "meta-llama--Meta-Llama-3.1-8B" in TOTALS
