"""The ledger's formulas as spreadsheet text over the workbook's defined names (one place)."""

from dataclasses import dataclass

from servecap.ledger.hybrid import DEFAULT_MAMBA_CHUNK_SIZE
from servecap.ledger.model import CHUNKED, SLIDING, ModelSpec

from .geometry import full_shape, v_differs

KV_BITS = "kv_bits_per_element"


@dataclass(frozen=True)
class Kinds:
    """The cache kinds a model has beyond uniform full/sliding attention: a formula names only
    the inputs its model has (a Llama workbook has no state cells). hybrid: layers are counted
    by kind (num_full_layers), since some hold no KV."""

    hybrid: bool = False
    chunked: bool = False
    full_shape: bool = False  # full layers have their own KV heads and head size (Gemma-4)
    indexer: bool = False
    state: bool = False
    # fixed lines of their own beside the weights, by defined name: LoRA slots
    # (lora_line_bytes), redundant experts and EPLB's state (eplb_line_bytes)
    extras: tuple[str, ...] = ()
    v_shape: bool = False  # V is stored at another size than K (MiMo-V2: v_head_dim cells)
    own_shapes: bool = False  # layers have their own shapes (ModelSpec.layer_shapes): a block
    # of every layer is the KV per token, not L x one layer's


PURE = Kinds()


def kinds_of(spec: ModelSpec, extras: tuple[str, ...] = ()) -> Kinds:
    att = spec.attention
    own_full = (bool(att.full_head_dim) and att.kind != "mla") or full_shape(spec) is not None
    return Kinds(spec.is_hybrid, CHUNKED in att.layer_kinds, own_full,
                 bool(att.indexer_head_dim), bool(spec.state_layers), extras,
                 v_shape=v_differs(spec), own_shapes=bool(spec.layer_shapes))


def per_layer_bits(bits: str = KV_BITS, named: bool = True, kinds: Kinds = PURE) -> str:
    """Bits one token stores in one layer. GQA: 2 [K,V] x H_kv x d_h x b_kv (H_kv x (d_k + d_v)
    x b_kv where V has its own size); MLA: one latent of (kv_lora_rank + qk_rope_head_dim) x
    b_kv, no factor 2 (ledger.kv.kv_bits_for_layer). At the workbook's KV width it is the
    Ledger's named cell, unless `named` is False."""
    if bits == KV_BITS and named:
        return "kv_bits_per_token_layer"
    gqa = "num_kv_heads*(head_dim+v_head_dim)" if kinds.v_shape else "2*num_kv_heads*head_dim"
    return f'IF(attention_kind="mla",(kv_lora_rank+qk_rope_head_dim)*{bits},{gqa}*{bits})'


def full_layer_bits(kinds: Kinds, bits: str = KV_BITS, named: bool = True) -> str:
    """A full-attention layer's bits per token: its own shape where it has one (Gemma-4's
    full_kv_heads x full_head_dim, ledger.model.Attention.shape), else per_layer_bits."""
    if not kinds.full_shape:
        return per_layer_bits(bits, named, kinds)
    if bits == KV_BITS and named:
        return "kv_bits_per_token_full_layer"
    if kinds.v_shape:
        return f"full_kv_heads*(full_head_dim+full_v_head_dim)*{bits}"
    return f"2*full_kv_heads*full_head_dim*{bits}"


def full_layers(kinds: Kinds) -> str:
    """Layers that keep every token: L - sliding, or counted where some layers hold no KV."""
    return "num_full_layers" if kinds.hybrid else "(num_layers-num_sliding_layers)"


def slots(tokens: str) -> str:
    """ceil(S / B) x B: the token slots a paged sequence of S tokens occupies."""
    return f"ROUNDUP({tokens}/block_size_tokens,0)*block_size_tokens"


# the tokens a windowed layer holds beyond its window: T, and for vLLM its batches in flight x
# its T (ledger.vllm_runner.window_in_flight)
IN_FLIGHT = "window_in_flight_tokens"


def window_peak_slots(tokens: str, in_flight: str = "max_num_batched_tokens") -> str:
    """(ceil(min(W - 1 + T', S) / B) + 1) x B: a windowed layer's in-flight prefill peak, vLLM's
    SlidingWindowSpec with max_model_len = S (ledger.paging.prefill_window_blocks); T' the
    batch (one device, the Ledger sheet) or IN_FLIGHT (a rank under the engine's release)."""
    return (f"(ROUNDUP(MIN(sliding_window_tokens-1+{in_flight},{tokens})"
            "/block_size_tokens,0)+1)*block_size_tokens")


def chunk_slots(tokens: str) -> str:
    """ceil(min(S, C) / B) x B: a chunked-local layer holds at most its chunk
    (ledger.kv.kv_bytes_by_layer_kind)."""
    return f"ROUNDUP(MIN({tokens},chunk_size_tokens)/block_size_tokens,0)*block_size_tokens"


def kv_request(tokens: str, bits: str = KV_BITS, kinds: Kinds = PURE) -> str:
    """Bytes one request of `tokens` holds at its peak: full layers keep every slot, sliding
    layers min(ceil(S/B), ceil(min(W-1+T, S)/B) + 1) blocks (its prefill in flight), chunked
    layers their chunk, each kind rounded up to whole bytes (ledger.kv.kv_bytes_by_layer_kind,
    ledger.paging.windowed_blocks with a token budget)."""
    layer = per_layer_bits(bits)
    window = window_peak_slots(tokens)
    held = f"IF(sliding_window_tokens>0,MIN({slots(tokens)},{window}),{slots(tokens)})"
    out = (f"ROUNDUP({full_layers(kinds)}*{slots(tokens)}*{full_layer_bits(kinds, bits)}/8,0)"
           f"+ROUNDUP(num_sliding_layers*{held}*{layer}/8,0)")
    if kinds.chunked:
        out += f"+ROUNDUP(num_chunked_layers*{chunk_slots(tokens)}*{layer}/8,0)"
    return out


def kv_per_token(kinds: Kinds) -> str:
    """Σ over layers of one token's bits, whole bytes (ledger.kv.kv_bytes_per_token)."""
    if not kinds.hybrid:
        return "ROUNDUP(num_layers*kv_bits_per_token_layer/8,0)"
    windowed = "num_sliding_layers" + ("+num_chunked_layers" if kinds.chunked else "")
    return (f"ROUNDUP((num_full_layers*{full_layer_bits(kinds)}+({windowed})"
            "*kv_bits_per_token_layer)/8,0)")


def shared_prefix_kv(kinds: Kinds) -> str:
    """A shared prefix's full blocks, stored once: only full layers share them (ledger.plan_kv
    kv_in_use_by_kind)."""
    return (f"ROUNDUP({full_layers(kinds)}*shared_prefix_slot_tokens*{full_layer_bits(kinds)}"
            "/8,0)")


# ledger.cache_specs.indexer_bytes_per_token: fp8 K values + one fp32 scale per 128 of them
INDEXER_LAYER_BYTES = "(indexer_head_dim+INT(indexer_head_dim/128)*4)"


def state_layer_bytes(tp: str = "1") -> str:
    """One state layer's conv + recurrent bytes on a rank of `tp` (ledger.state.
    state_bytes_per_layer, state_shapes): conv (kernel - 1) x conv_dim / tp in the conv dtype,
    recurrent heads / tp x elements per head in the ssm dtype. Mamba-2 replicates its B/C groups
    when tp does not divide them (conv_dim = intermediate + 2 tp d_state); a tp that does not
    divide the conv width or the heads is #N/A, as vLLM's divide() refuses it."""
    conv_bits = "VLOOKUP(state_conv_dtype,dtype_bits,2,FALSE)"
    ssm_bits = "VLOOKUP(state_ssm_dtype,dtype_bits,2,FALSE)"
    if tp == "1":
        return (f"ROUNDUP(((state_conv_kernel-1)*state_conv_dim*{conv_bits}"
                f"+state_recurrent_heads*state_head_elements*{ssm_bits})/8,0)")
    conv = (f"IF(AND(state_n_groups>0,MOD(state_n_groups,{tp})>0),"
            f"state_intermediate+2*{tp}*state_d_state,state_conv_dim)")
    return (f"IF(OR(MOD({conv},{tp})>0,MOD(state_recurrent_heads,{tp})>0),NA(),"
            f"ROUNDUP(((state_conv_kernel-1)*{conv}/{tp}*{conv_bits}"
            f"+state_recurrent_heads/{tp}*state_head_elements*{ssm_bits})/8,0))")


def extra_per_request(tokens: str, kinds: Kinds, state: str = "state_bytes_per_request",
                      indexer: str = "indexer_bytes_per_token") -> str:
    """What one request holds beside its KV: the indexer K of its slots and its fixed states
    (ledger.plan build_plan's whole_request); '' for a model with neither."""
    out = f"+{slots(tokens)}*{indexer}" if kinds.indexer else ""
    return out + (f"+{state}" if kinds.state else "")


def ceiling(device: str, safety: str, weights: str, per_request: str,
            kinds: Kinds = PURE) -> str:
    """N_memory = floor((M_device - M_weights - M_meta - M_runtime - M_safety) / M_request),
    at least 0 (seed 000); the extra fixed lines (LoRA slots, EPLB) come off too. INT is
    floor for every sign."""
    free = f"{device}-{weights}-weight_metadata_bytes-runtime_peak_bytes-{safety}" + "".join(
        f"-{name}" for name in kinds.extras)
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


# vLLM's hybrid page arithmetic (ledger.hybrid), step by step over one rank's cells.
# the attention kernels' block alignment (MLA: 64), with gated-DeltaNet prefill checkpoints
# (vLLM 0.33 on Hopper, align mode: 64) its lcm
ALIGN = 'LCM(IF(attention_kind="mla",64,16),state_checkpoint_alignment)'
MAMBA_CHUNK = f"LCM({DEFAULT_MAMBA_CHUNK_SIZE},{ALIGN})"


def raised_block(state: str, one_token: str) -> str:
    """ledger.hybrid._block_size: the smallest multiple of the alignment whose page (block x
    one attention token) holds one state (mamba_cache_mode 'all' to vLLM 0.31: a multiple of
    lcm(Mamba chunk, alignment)); a larger block_size_tokens is kept; never below ceil(state /
    token)."""
    tokens = f"ROUNDUP({state}/{one_token},0)"
    return (f'MAX(block_size_tokens,IF(AND(mamba_cache_mode="all",mamba_all_chunk_aligned=1),'
            f'{MAMBA_CHUNK}*ROUNDUP({tokens}/'
            f"{MAMBA_CHUNK},0),{ALIGN}*ROUNDUP({state}/({ALIGN}*{one_token}),0)),{tokens})")


def unified_block(page: str, block: str, token_bytes: str) -> str:
    """ledger.hybrid._unify_pages: a smaller page's block grows by largest page / its page, so
    every group's page is one size: block x page / (block x token) = page / token. vLLM raises
    NotImplementedError unless the ratio is whole: #N/A."""
    return f"IF(MOD({page},{block}*{token_bytes})>0,NA(),{page}/{token_bytes})"


def request_pages(kind: str, block: str) -> str:
    """Pages one max_model_len request reserves in one group of `kind` (ledger.cache_specs
    max_memory_usage_bytes / page_size_bytes): full cdiv(L, B); sliding cdiv(min(W - 1 + T, L),
    B) + 1; chunked cdiv(min(C + T, L), B); a state 1 page ('none'), 2 ('align', + its prefill
    checkpoint pages) or cdiv(L, B) ('all'); L = context_tokens, T = IN_FLIGHT."""
    full = f"ROUNDUP(context_tokens/{block},0)"
    if kind == SLIDING:
        return (f"IF(sliding_window_tokens>0,ROUNDUP(MIN(sliding_window_tokens-1+"
                f"{IN_FLIGHT},context_tokens)/{block},0)+1,{full})")
    if kind == CHUNKED:
        return f"ROUNDUP(MIN(chunk_size_tokens+{IN_FLIGHT},context_tokens)/{block},0)"
    if kind == "state":
        return (f'IF(mamba_cache_mode="all",{full},IF(mamba_cache_mode="align",'
                f"2+state_checkpoint_pages,1))")
    return full
