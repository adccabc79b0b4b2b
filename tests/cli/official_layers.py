"""An independent per-layer reading of an official config.json, written from each family's own
config fields and its vLLM model class (vllm/model_executor/models/ at v0.21.0), never from
servecap's code: every layer's kind, KV heads, K and V head sizes, the layer whose K and V it
reads, and the fixed state it keeps per request (bf16 unless the config says otherwise)."""

BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}


def text_part(data: dict) -> dict:
    """The language model: text_config (InternVL: llm_config) where a wrapper has one, else
    the config itself."""
    text = data.get("text_config")
    text = text if isinstance(text, dict) else data.get("llm_config")
    if not isinstance(text, dict):
        return data
    out = dict(text)
    for key in ("tie_word_embeddings", "quantization_config", "torch_dtype", "dtype"):
        if out.get(key) is None and data.get(key) is not None:
            out[key] = data[key]
    return out


def layer(kind: str, kv_heads: int = 0, k: int = 0, v: int = 0, source=None, state: int = 0):
    return {"kind": kind, "kv_heads": kv_heads, "k": k, "v": v, "source": source,
            "state": state}


def expected_layers(cfg: dict) -> list[dict]:
    """Each layer as the family's vLLM class builds it."""
    family = cfg.get("model_type")
    reader = FAMILIES.get(family, _plain)
    return reader(cfg)


def _kinds(cfg: dict) -> list[str]:
    """full / sliding per layer: layer_types, else the family's pattern."""
    n = cfg["num_hidden_layers"]
    if cfg.get("layer_types"):
        names = {"sliding_attention": "sliding", "full_attention": "full", "conv": "conv",
                 "attention": "full"}
        return [names[t] for t in cfg["layer_types"]]
    family = cfg.get("model_type")
    if family == "gemma2":  # Gemma2 alternates from layer 0
        return ["sliding" if i % 2 == 0 else "full" for i in range(n)]
    if family == "gemma3_text":  # one full layer in six (Gemma3TextConfig default)
        every = cfg.get("sliding_window_pattern", 6)
        return ["full" if (i + 1) % every == 0 else "sliding" for i in range(n)]
    if family == "gpt_oss":
        return ["sliding" if i % 2 == 0 else "full" for i in range(n)]
    if family in ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "mimo", "qwen2_5_vl") or \
            not cfg.get("sliding_window") or cfg.get("use_sliding_window") is False:
        return ["full"] * n  # (Qwen's max_window_layers only with use_sliding_window)
    return ["sliding"] * n  # LlamaAttention: cache_config.sliding_window on every layer


def _head_dim(cfg: dict) -> int:
    return cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]


def _plain(cfg: dict) -> list[dict]:
    if "kv_lora_rank" in cfg:  # MLA: one latent of kv_lora_rank + qk_rope_head_dim
        width = cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"]
        return [layer("full", 1, width, 0) for _ in range(cfg["num_hidden_layers"])]
    if "linear_num_value_heads" in cfg:
        return _gated_deltanet(cfg)
    if "hybrid_override_pattern" in cfg:
        return _nemotron_h(cfg)
    heads = cfg.get("num_key_value_heads") or cfg["num_attention_heads"]
    dim = _head_dim(cfg)
    if cfg.get("attention_chunk_size"):  # Llama-4: three chunked layers, then a NoPE full one
        return [layer("full" if (i + 1) % 4 == 0 else "chunked", heads, dim, dim)
                for i in range(cfg["num_hidden_layers"])]
    if cfg.get("model_type") == "gemma4_text":
        return _gemma4(cfg)
    return [layer(kind, heads, dim, dim) for kind in _kinds(cfg)]


def _gemma4(cfg: dict) -> list[dict]:
    """Full layers global_head_dim wide (num_global_key_value_heads with attention_k_eq_v); the
    last num_kv_shared_layers read the last earlier layer of their type."""
    kinds = _kinds(cfg)
    shared = cfg.get("num_kv_shared_layers") or 0
    first = len(kinds) - shared
    out = []
    for i, kind in enumerate(kinds):
        heads, dim = cfg["num_key_value_heads"], cfg["head_dim"]
        if kind == "full" and cfg.get("global_head_dim"):
            dim = cfg["global_head_dim"]
            if cfg.get("attention_k_eq_v"):
                heads = cfg["num_global_key_value_heads"]
        source = None
        if shared and i >= first:
            source = max(j for j in range(first) if kinds[j] == kind)
        out.append(layer(kind, heads, dim, dim, source))
    return out


def _gated_deltanet(cfg: dict) -> list[dict]:
    hk, hv = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
    dk, dv = cfg["linear_key_head_dim"], cfg["linear_value_head_dim"]
    conv = (cfg["linear_conv_kernel_dim"] - 1) * (2 * hk * dk + hv * dv) * 2
    state = conv + hv * dv * dk * BYTES[cfg.get("mamba_ssm_dtype", "bfloat16")]
    every = cfg.get("full_attention_interval", 4)
    heads, dim = cfg["num_key_value_heads"], cfg["head_dim"]
    return [layer("full", heads, dim, dim) if (i + 1) % every == 0 else
            layer("linear", state=state) for i in range(cfg["num_hidden_layers"])]


def _nemotron_h(cfg: dict) -> list[dict]:
    heads, dim = cfg["mamba_num_heads"], cfg["mamba_head_dim"]
    conv_dim = heads * dim + 2 * cfg["n_groups"] * cfg["ssm_state_size"]
    state = (cfg["conv_kernel"] - 1) * conv_dim * 2 + heads * dim * cfg["ssm_state_size"] * \
        BYTES[cfg.get("mamba_ssm_cache_dtype", "float16")]
    kv, hd = cfg["num_key_value_heads"], _head_dim(cfg)
    return [layer("mamba", state=state) if c == "M" else layer("full", kv, hd, hd) if c == "*"
            else layer("none") for c in cfg["hybrid_override_pattern"]]


def _deci(cfg: dict) -> list[dict]:
    """DeciLMDecoderLayer: a no_op attention block caches nothing; else num_attention_heads /
    n_heads_in_group KV heads of hidden / heads."""
    dim = cfg["hidden_size"] // cfg["num_attention_heads"]
    return [layer("none") if b["attention"]["no_op"] else
            layer("full", cfg["num_attention_heads"] // b["attention"]["n_heads_in_group"],
                  dim, dim) for b in cfg["block_configs"]]


def _mimo_v2(cfg: dict) -> list[dict]:
    """MiMoV2DecoderLayer: hybrid_layer_pattern 1 is a sliding layer with the swa_* shape."""
    return [layer("sliding", cfg["swa_num_key_value_heads"], cfg["swa_head_dim"],
                  cfg["swa_v_head_dim"]) if p else
            layer("full", cfg["num_key_value_heads"], cfg["head_dim"], cfg["v_head_dim"])
            for p in cfg["hybrid_layer_pattern"]]


def _lfm2(cfg: dict) -> list[dict]:
    """Lfm2: conv layers keep (conv_L_cache - 1) x conv_dim in bf16 (ShortConv), attention
    layers hidden / heads wide."""
    state = (cfg["conv_L_cache"] - 1) * cfg["conv_dim"] * 2
    dim = cfg["hidden_size"] // cfg["num_attention_heads"]
    return [layer("conv", state=state) if t == "conv" else
            layer("full", cfg["num_key_value_heads"], dim, dim) for t in cfg["layer_types"]]


def _exaone4(cfg: dict) -> list[dict]:
    """Exaone4: layer_types, else sliding_window_pattern ('LLLG': L sliding, G full)."""
    dim, heads = cfg["head_dim"], cfg["num_key_value_heads"]
    if cfg.get("layer_types"):
        kinds = _kinds(cfg)
    else:
        pattern = cfg["sliding_window_pattern"]
        kinds = ["full" if pattern[i % len(pattern)] == "G" else "sliding"
                 for i in range(cfg["num_hidden_layers"])]
    return [layer(k, heads, dim, dim) for k in kinds]


FAMILIES = {"nemotron-nas": _deci, "mimo_v2_flash": _mimo_v2, "lfm2": _lfm2,
            "exaone4": _exaone4}


def kv_bytes(row: dict) -> int:
    """bf16 bytes one token takes in the layer: H_kv x (d_k + d_v) x 2 (MLA: the latent x 2);
    nothing for a layer that reads another's K and V."""
    if row["kind"] not in ("full", "sliding", "chunked") or row["source"] is not None:
        return 0
    return row["kv_heads"] * (row["k"] + row["v"]) * 2
