"""A GGUF file's metadata read as the config.json fields its architecture has (llama.cpp's
convert_hf_to_gguf.py writes them from that config: {arch}.block_count = num_hidden_layers,
...), for the architectures whose tensors servecap's inventory names the same way."""

from servecap.ledger.errors import SpecError

# general.architecture -> model_type
ARCHITECTURES = {"llama": "llama", "qwen2": "qwen2", "qwen3": "qwen3", "qwen3moe": "qwen3_moe",
                 "qwen2moe": "qwen2_moe", "mistral": "mistral"}
FIELDS = {"block_count": "num_hidden_layers", "embedding_length": "hidden_size",
          "feed_forward_length": "intermediate_size", "context_length":
          "max_position_embeddings", "attention.head_count": "num_attention_heads",
          "attention.head_count_kv": "num_key_value_heads", "attention.key_length": "head_dim",
          "expert_count": "num_experts", "expert_used_count": "num_experts_per_tok",
          "expert_feed_forward_length": "moe_intermediate_size",
          "expert_shared_feed_forward_length": "shared_expert_intermediate_size"}


def config_from(meta: dict, table: list, source: str) -> dict:
    """config.json fields from the metadata; the vocabulary from token_embd's shape; tied
    embeddings when the file holds no output.weight (llama.cpp reuses token_embd)."""
    arch = meta.get("general.architecture")
    if arch not in ARCHITECTURES:
        raise SpecError("general.architecture", arch, "GGUF architectures planned: "
                        + ", ".join(sorted(ARCHITECTURES)) + f" (in {source})")
    cfg = {"model_type": ARCHITECTURES[arch], "torch_dtype": "bfloat16"}
    for key, field in FIELDS.items():
        value = meta.get(f"{arch}.{key}")
        if isinstance(value, list):  # per-layer head counts: a uniform list reads as one
            if len(set(value)) != 1:
                raise SpecError(f"{arch}.{key}", value, "one value for every layer")
            value = value[0]
        if value is not None:
            cfg[field] = int(value)
    shapes = {name: shape for name, shape, _ in table}
    embed = shapes.get("token_embd.weight")
    if embed is None or len(embed) != 2:
        raise SpecError("token_embd.weight", embed, f"a 2-D embedding tensor (in {source})")
    cfg["vocab_size"] = int(embed[1])  # ggml lists ne0 (hidden) first
    cfg["tie_word_embeddings"] = "output.weight" not in shapes
    return cfg
