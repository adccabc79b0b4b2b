"""Every official config.json kept in tests/fixtures/configs plans (exit 0 or 1, never 2), and
its KV per token, KV per request, fixed state per request and parameter count equal an
independent computation written here from the config's fields, vLLM's cache rules
(vllm/v1/kv_cache_interface.py, mamba_utils.py) and transformers' own model classes."""

import json
from pathlib import Path

import pytest

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
DIRS = sorted(p.name for p in CONFIGS.iterdir() if (p / "config.json").exists())
CONTEXT, BLOCK, BUDGET = 8192, 16, 8192  # BUDGET: vLLM's max_num_batched_tokens, plan's default
BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}


def text_config(name: str) -> dict:
    """The text decoder's fields; those the file leaves out (google/gemma-3-4b-it states no
    heads) from transformers' config class, as the engines read them."""
    data = json.loads((CONFIGS / name / "config.json").read_text())
    cfg = data.get("text_config", data) if "hidden_size" not in data else data
    if "num_attention_heads" in cfg:
        return cfg
    defaults = transformers_config(cfg).to_dict()
    return {**{k: defaults[k] for k in defaults if k not in cfg}, **cfg}


def layer_kinds(cfg: dict) -> list[str]:
    """full / sliding / chunked / linear / mamba / none for each layer, from the config (or,
    where it states none, from transformers' config class: Gemma-3's one full layer in six)."""
    n = cfg["num_hidden_layers"]
    if cfg.get("model_type") == "gemma3_text" and not cfg.get("layer_types"):
        cfg = {**cfg, "layer_types": transformers_config(cfg).layer_types}
    if "hybrid_override_pattern" in cfg:
        return [{"M": "mamba", "*": "full"}.get(c, "none") for c in cfg["hybrid_override_pattern"]]
    if "linear_num_value_heads" in cfg:
        every = cfg.get("full_attention_interval", 4)
        return ["full" if (i + 1) % every == 0 else "linear" for i in range(n)]
    if cfg.get("attention_chunk_size"):
        return ["full" if (i + 1) % 4 == 0 else "chunked" for i in range(n)]
    if cfg.get("layer_types"):
        return ["sliding" if t == "sliding_attention" else "full" for t in cfg["layer_types"]]
    if cfg.get("model_type") == "gpt_oss":
        return ["sliding" if i % 2 == 0 else "full" for i in range(n)]
    return ["full"] * n


def transformers_config(cfg: dict):
    transformers = pytest.importorskip("transformers")
    data = {k: v for k, v in cfg.items() if k != "model_type"}
    return transformers.AutoConfig.for_model(cfg["model_type"], **data)


def kv_per_token_layer(cfg: dict, kind: str) -> int:
    """bf16 bytes one token takes in one attention layer: MLA one latent, GQA 2 H_kv d."""
    if "kv_lora_rank" in cfg:
        return (cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"]) * 2
    heads = cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    if kind == "full" and cfg.get("global_head_dim"):
        dim = cfg["global_head_dim"]
        heads = cfg["num_global_key_value_heads"] if cfg.get("attention_k_eq_v") else heads
    return 2 * heads * dim * 2


def slots(cfg: dict, kind: str) -> int:
    """Token slots one 8,192-token request holds in a layer of this kind (16-token blocks) at
    its peak; a sliding layer's is its prefill in flight (vLLM's SlidingWindowSpec: the window
    - 1 + one step's batched tokens, capped at the request, + 1 block, at most its own)."""
    if kind == "sliding":
        window = cfg.get("sliding_window") or 128
        return min(CONTEXT, (-(-min(window - 1 + BUDGET, CONTEXT) // BLOCK) + 1) * BLOCK)
    if kind == "chunked":
        return min(CONTEXT, cfg["attention_chunk_size"])
    return CONTEXT


def state_per_request(cfg: dict) -> int:
    """Σ state layers x (conv (kernel-1) x conv_dim in bf16 + recurrent state in its dtype)."""
    kinds = layer_kinds(cfg)
    if "linear_num_value_heads" in cfg:
        hk, hv = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
        dk, dv = cfg["linear_key_head_dim"], cfg["linear_value_head_dim"]
        conv = (cfg["linear_conv_kernel_dim"] - 1) * (2 * hk * dk + hv * dv) * 2
        ssm = hv * dv * dk * BYTES[cfg.get("mamba_ssm_dtype", "bfloat16")]
        return kinds.count("linear") * (conv + ssm)
    if "mamba_num_heads" in cfg:
        heads, dim = cfg["mamba_num_heads"], cfg["mamba_head_dim"]
        conv_dim = heads * dim + 2 * cfg["n_groups"] * cfg["ssm_state_size"]
        conv = (cfg["conv_kernel"] - 1) * conv_dim * 2
        ssm = heads * dim * cfg["ssm_state_size"] * BYTES[cfg.get("mamba_ssm_cache_dtype",
                                                                 "float16")]
        return kinds.count("mamba") * (conv + ssm)
    return 0


def transformers_parameters(name: str) -> int:
    """transformers' model class on the meta device: parameters + persistent buffers (what a
    checkpoint stores). Kimi-K2 is built as DeepSeek-V3, the class its architectures name."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()
    data = json.loads((CONFIGS / name / "config.json").read_text())
    if data.get("model_type") == "kimi_k2":
        data = {k: v for k, v in data.items() if k not in ("auto_map", "model_type")}
        cfg = transformers.DeepseekV3Config(**data)
    else:
        cfg = transformers.AutoConfig.for_model(data.pop("model_type"), **data)
    cfg = getattr(cfg, "text_config", None) or cfg
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(cfg)
    state = model.state_dict()
    return sum(p.numel() for p in model.parameters()) + sum(
        b.numel() for key, b in model.named_buffers() if key in state)


@pytest.mark.parametrize("name", DIRS)
def test_official_config_plans_with_exact_kv_state_and_parameters(run, name: str) -> None:
    result = run("plan", CONFIGS / name / "config.json", "--device", "h100-80gb", "--context",
                 str(CONTEXT), "--json")
    assert result.exit_code in (0, 1), result.output
    out = json.loads(result.stdout)
    cfg = text_config(name)
    kinds = layer_kinds(cfg)
    attention = [k for k in kinds if k in ("full", "sliding", "chunked")]
    assert out["kv_bytes_per_token"] == sum(kv_per_token_layer(cfg, k) for k in attention)
    assert out["kv_bytes_per_request"] == sum(
        slots(cfg, k) * kv_per_token_layer(cfg, k) for k in attention)
    assert out["state_bytes_per_request"] == state_per_request(cfg)
    assert out["num_parameters"] == transformers_parameters(name)


def test_every_family_of_the_survey_has_a_fixture() -> None:
    families = ("Llama-4-Scout", "Llama-4-Maverick", "Kimi-K2", "DeepSeek-V3.2", "GLM-5",
                "Qwen3-Next", "Qwen3.5", "Qwen3.6", "Nemotron-H", "Nemotron-3-Nano",
                "MiniMax-M2.5", "gemma-4", "DeepSeek-V3.1", "gpt-oss-120b", "Llama-3.1-405B",
                "gemma-3-27b-it", "phi-4", "Devstral-Small-2")
    assert all(any(f in d for d in DIRS) for f in families)
    assert all((CONFIGS / d / "SOURCE.md").exists() for d in DIRS)


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
