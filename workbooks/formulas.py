"""The ledger's formulas as spreadsheet text over the workbook's defined names (one place)."""

KV_BITS = "kv_bits_per_element"


def per_layer_bits(bits: str = KV_BITS) -> str:
    """Bits one token stores in one layer. GQA: 2 [K,V] x H_kv x d_h x b_kv; MLA: one latent of
    (kv_lora_rank + qk_rope_head_dim) x b_kv, no factor 2 (ledger.kv.kv_bits_per_token_layer)."""
    if bits == KV_BITS:
        return "kv_bits_per_token_layer"
    return (f'IF(attention_kind="mla",(kv_lora_rank+qk_rope_head_dim)*{bits},'
            f"2*num_kv_heads*head_dim*{bits})")


def slots(tokens: str) -> str:
    """ceil(S / B) x B: the token slots a paged sequence of S tokens occupies."""
    return f"ROUNDUP({tokens}/block_size_tokens,0)*block_size_tokens"


def window_peak_slots(tokens: str) -> str:
    """(ceil(min(W - 1 + T, S) / B) + 1) x B: a windowed layer's in-flight prefill peak, vLLM's
    SlidingWindowSpec with max_model_len = S (ledger.paging.prefill_window_blocks)."""
    return (f"(ROUNDUP(MIN(sliding_window_tokens-1+max_num_batched_tokens,{tokens})"
            "/block_size_tokens,0)+1)*block_size_tokens")


def kv_request(tokens: str, bits: str = KV_BITS) -> str:
    """Bytes one request of `tokens` holds at its peak: full layers keep every slot, sliding
    layers min(ceil(S/B), ceil(min(W-1+T, S)/B) + 1) blocks (its prefill in flight), each kind
    rounded up to whole bytes (ledger.kv.kv_bytes_by_layer_kind, ledger.paging.windowed_blocks
    with a token budget)."""
    layer = per_layer_bits(bits)
    window = window_peak_slots(tokens)
    held = f"IF(sliding_window_tokens>0,MIN({slots(tokens)},{window}),{slots(tokens)})"
    return (f"ROUNDUP((num_layers-num_sliding_layers)*{slots(tokens)}*{layer}/8,0)"
            f"+ROUNDUP(num_sliding_layers*{held}*{layer}/8,0)")


def ceiling(device: str, safety: str, weights: str, per_request: str) -> str:
    """N_memory = floor((M_device - M_weights - M_meta - M_runtime - M_safety) / M_KV,request),
    at least 0 (seed 000). INT is floor for every sign."""
    free = f"{device}-{weights}-weight_metadata_bytes-runtime_peak_bytes-{safety}"
    return f"=IF({per_request}>0,MAX(0,INT(({free})/{per_request})),0)"


def weights_computed(bits_quantized: str = "quantized_bits_per_parameter",
                     bits_dense: str = "dense_bits_per_parameter") -> str:
    """ceil((P_q x b_q + (P - P_q) x b_dense) / 8) bytes (ledger.weights.weight_bytes)."""
    return (f"ROUNDUP((quantized_parameters*{bits_quantized}"
            f"+(num_parameters-quantized_parameters)*{bits_dense})/8,0)")


def safety_on(device: str) -> str:
    """The safety reserve on another device: a share scales with it, declared bytes do not
    (ledger.plan.with_device; the default share is vLLM's 10%)."""
    return f'IF(safety_rule="bytes",safety_bytes,INT({device}*safety_fraction))'
