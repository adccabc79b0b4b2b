"""The Ranks sheet's rows: each line of one rank's ledger and engine budget as a formula.

`[key]` is this rank's cell of that row, `<key>` the whole row across ranks; the rest are the
workbook's named inputs. The arithmetic is ledger.engines' and ledger.kv's, cell for cell.
"""

from dataclasses import dataclass

from servecap.ledger.engines import PLAIN, SGLANG, TRTLLM, VLLM
from servecap.ledger.model import CHUNKED, FULL, SLIDING

from . import style
from .formulas import (
    IN_FLIGHT,
    INDEXER_LAYER_BYTES,
    PURE,
    Kinds,
    chunk_slots,
    extra_per_request,
    raised_block,
    request_pages,
    state_layer_bytes,
    unified_block,
    window_peak_slots,
)

FIXED = (("weights", "weights"), ("weight_metadata", "weight metadata"),
         ("weights_resident", "weight layout in vLLM (beyond the checkpoint)"),
         ("lora_adapters", "LoRA adapter slots"),
         ("eplb", "redundant experts and EPLB state"),
         ("runtime_peak", "runtime peak"),
         ("encoder_cache", "multimodal encoder cache (profiled)"),
         ("encoder_profile", "vision encoder peak beyond runtime peak"),
         ("rotary_cache", "rotary cos/sin cache"),
         ("encoder_weights", "vision encoder weights"),
         ("non_torch", "non-torch memory"), ("comm_buffers", "communication buffers"),
         ("cuda_graphs", "CUDA graph pool"))
# lines only a multimodal plan has: their rows are written where the plan has them, and a
# formula naming one where it is absent reads 0
OPTIONAL = frozenset({"encoder_cache", "encoder_profile"})
# vLLM, after sizing its pool (ledger.vllm_after): what precedes its baseline, the CUDA graphs it
# captures and the sampler warm-up, each the plan's estimate carried as a value on every rank
AFTER = (("after_pool_outside", "after the pool: in use before vLLM's baseline (plan's)"),
         ("after_pool_graphs", "after the pool: CUDA-graph capture (plan's)"),
         ("after_pool_warmup", "after the pool: sampler warm-up peak (plan's)"))
# what stays allocated once the pool exists (ledger.vllm_after.HELD); the profile's
# activations are free again
HELD = "+".join(f"[{key}]" for key in ("weights", "weight_metadata", "weights_resident",
                                       "lora_adapters", "eplb", "rotary_cache",
                                       "encoder_weights", "non_torch", "comm_buffers"))


def layer_bits(kinds: Kinds) -> str:
    """One token in one layer on this rank (formulas.per_layer_bits, KV heads per rank)."""
    gqa = "[kv_heads]*(head_dim+v_head_dim)" if kinds.v_shape else "2*[kv_heads]*head_dim"
    return ('IF(attention_kind="mla",(kv_lora_rank+qk_rope_head_dim)*kv_bits_per_element,'
            f"{gqa}*kv_bits_per_element)")


def full_layer_bits(kinds: Kinds) -> str:
    """One token in one full layer of its own shape on this rank."""
    if kinds.v_shape:
        return "[full_kv_heads]*(full_head_dim+full_v_head_dim)*kv_bits_per_element"
    return "2*[full_kv_heads]*full_head_dim*kv_bits_per_element"


# a windowed layer holds min(ceil(S/B), ceil(min(W-1+T, S)/B) + 1) blocks at its peak, its
# prefill in flight (ledger.paging.windowed_blocks); over the load's lengths min(a, b) is written
# a - (a>b)(a-b), as MIN would aggregate the array
SPAN = f"(sliding_window_tokens-1+{IN_FLIGHT})"
LENGTHS_SPAN = f"(load_lengths_tokens-(load_lengths_tokens>{SPAN})*(load_lengths_tokens-{SPAN}))"
WINDOW_SLOTS = f"(ROUNDUP({LENGTHS_SPAN}/block_size_tokens,0)+1)*block_size_tokens"
SLOTS = "ROUNDUP(load_lengths_tokens/block_size_tokens,0)*block_size_tokens"
HELD_SLOTS = (f"({SLOTS}-(sliding_window_tokens>0)*({SLOTS}>{WINDOW_SLOTS})"
              f"*({SLOTS}-{WINDOW_SLOTS}))")
# a chunked-local layer holds ceil(min(S, C) / B) x B slots of each length
CHUNK_LENGTHS = ("(load_lengths_tokens-(load_lengths_tokens>chunk_size_tokens)"
                 "*(load_lengths_tokens-chunk_size_tokens))")
CHUNK_SLOTS = f"ROUNDUP({CHUNK_LENGTHS}/block_size_tokens,0)*block_size_tokens"
SLOTS_ONE = "ROUNDUP(context_tokens/block_size_tokens,0)*block_size_tokens"
HELD_ONE = (f"IF(sliding_window_tokens>0,MIN({SLOTS_ONE},"
            f"{window_peak_slots('context_tokens', IN_FLIGHT)}),{SLOTS_ONE})")
WEIGHTS = ("([weights]+[weight_metadata]+[weights_resident]+[lora_adapters]+[eplb]"
           "+[rotary_cache]+[encoder_weights])")
# vLLM's profiled peak: the decoder's, the encoder cache held beside it, the encoder's excess
VLLM_ACT = "([runtime_peak]+[encoder_cache]+[encoder_profile])"
POOL = {
    VLLM: ("IF(ISNUMBER(kv_cache_memory_bytes),kv_cache_memory_bytes,TRUNC(device_bytes*"
           f"gpu_memory_utilization-({WEIGHTS}+{VLLM_ACT}+[non_torch]+[comm_buffers]"
           "+[cuda_graphs])))"),
    SGLANG: f"TRUNC([free_start]*mem_fraction_static)-{WEIGHTS}",
    TRTLLM: "TRUNC([free_start]*free_gpu_memory_fraction)",
}
HEADROOM = {
    VLLM: (f"IF(ISNUMBER(kv_cache_memory_bytes),device_bytes-{WEIGHTS}-{VLLM_ACT}-[non_torch]"
           "-[cuda_graphs]-[comm_buffers]-kv_cache_memory_bytes,device_bytes-TRUNC(device_bytes*"
           "gpu_memory_utilization))"),
    SGLANG: ("[free_start]-TRUNC([free_start]*mem_fraction_static)-[runtime_peak]"
             "-[cuda_graphs]"),
    TRTLLM: "[free_start]-[pool]",
}
FREE_START = {
    SGLANG: "device_bytes-[non_torch]-[comm_buffers]",
    TRTLLM: f"device_bytes-{WEIGHTS}-[runtime_peak]-[non_torch]-[comm_buffers]-[cuda_graphs]",
}


@dataclass(frozen=True)
class RankModel:
    """What shapes a rank's formulas: the engine, the model's cache kinds, and for vLLM on a
    hybrid the kinds of its cache groups (ledger.hybrid.layout), whether they form one
    uniform-type group (MLA + indexer), and the kind of the first attention layer (its token
    sizes the page a state must fit)."""

    engine: str
    kinds: Kinds = PURE
    group_kinds: tuple[str, ...] = ()
    uniform: bool = False
    first_attention_full: bool = True
    tokens_from_concurrency: bool = False
    concurrency_v0: bool = False  # vLLM V0's blocks x B / L (ledger.kv_blocks.max_concurrency)
    lora_outside: bool = False  # the release's profile misses the LoRA slots (lora_rules)

    @property
    def vllm_hybrid(self) -> bool:
        return self.engine == VLLM and self.kinds.hybrid

    @property
    def full_bits(self) -> str:
        return "[kv_bits_full_layer]" if self.kinds.full_shape else "[kv_bits_layer]"

    @property
    def caches(self) -> str:
        """This rank's caches in use: KV, indexer K, fixed states."""
        kinds = self.kinds
        if not (kinds.indexer or kinds.state):
            return "[kv_cache]"
        return "(" + "+".join(["[kv_cache]"] + ["[indexer_cache]"] * kinds.indexer
                              + ["[state_cache]"] * kinds.state) + ")"


def rank_rows(model: RankModel) -> list[tuple[str, str, str | None, str]]:
    """(key, label, number format, formula or '' for a value)."""
    rows = _kv_rows(model) + _cache_rows(model)
    if model.engine == PLAIN:
        return rows + _plain_rows(model)
    if model.engine in FREE_START:
        rows.append(("free_start", "memory the engine sizes from", style.BYTES,
                     FREE_START[model.engine]))
    rows += [
        ("pool", "KV pool as sized", style.BYTES, _outside(POOL[model.engine], model, True)),
        ("kv_pool_bytes", "KV pool", style.BYTES, "MAX([pool],0)"),
        ("headroom", "outside the engine budget", style.BYTES,
         _outside(HEADROOM[model.engine], model, False))]
    return rows + (_hybrid_page_rows(model) if model.vllm_hybrid else
                   _page_rows(model.engine, model.kinds)) \
        + _budget_rows(model)


def _outside(formula: str, model: RankModel, pool: bool) -> str:
    """vLLM's pool and headroom where its profile misses the LoRA slots (V0's
    memory_profiling rows, ledger.lora_rules.slots_in_budget): the pool does not subtract
    them; the headroom of the utilization branch holds them (the declared pool's branch
    already subtracts every line)."""
    if not model.lora_outside:
        return formula
    if pool:
        return formula.replace("+[lora_adapters]", "")
    return formula.replace(",device_bytes-TRUNC(", ",device_bytes-[lora_adapters]-TRUNC(")


def _kv_rows(model: RankModel) -> list[tuple]:
    kinds = model.kinds
    rows = [("kv_heads", "KV heads on this rank", style.HEADS,
             'IF(attention_kind="mla",0,ROUNDUP(num_kv_heads/tensor_parallel_size,0))')]
    if kinds.full_shape:
        rows.append(("full_kv_heads", "full layers' KV heads on this rank", style.HEADS,
                     "ROUNDUP(full_kv_heads/tensor_parallel_size,0)"))
    rows.append(("kv_bits_layer", "KV per token per layer", style.BITS, layer_bits(kinds)))
    if kinds.full_shape:
        rows.append(("kv_bits_full_layer", "KV per token per full layer", style.BITS,
                     full_layer_bits(kinds)))
    return rows + [
        ("kv_bytes_per_token", "KV per token", style.BYTES, _kv_per_token(model)),
        ("kv_request_context", "KV per request at context", style.BYTES, _kv_request(model)),
        ("kv_cache", "KV cache in use", style.BYTES, _kv_in_use(model)),
        ("kv_bytes_per_request", "KV per request", style.BYTES,
         "IF(explicit_lengths,ROUNDUP([kv_cache]/requests,0),[kv_request_context])")]


def _kv_per_token(model: RankModel) -> str:
    if not model.kinds.hybrid:
        return "ROUNDUP([layers]*[kv_bits_layer]/8,0)"
    return (f"ROUNDUP(([full_layers]*{model.full_bits}+({_windowed(model.kinds)})"
            "*[kv_bits_layer])/8,0)")


def _windowed(kinds: Kinds) -> str:
    return "[sliding_layers]" + ("+[chunked_layers]" if kinds.chunked else "")


def _full(model: RankModel) -> str:
    return "[full_layers]" if model.kinds.hybrid else "([layers]-[sliding_layers])"


def _kv_request(model: RankModel) -> str:
    out = (f"ROUNDUP({_full(model)}*{SLOTS_ONE}*{model.full_bits}/8,0)"
           f"+ROUNDUP([sliding_layers]*{HELD_ONE}*[kv_bits_layer]/8,0)")
    if model.kinds.chunked:
        out += f"+ROUNDUP([chunked_layers]*{chunk_slots('context_tokens')}*[kv_bits_layer]/8,0)"
    return out


def _kv_in_use(model: RankModel) -> str:
    """Σ over the load's lengths; min(a, b) over an array is a - (a>b)(a-b) (MIN aggregates)."""
    terms = (f"ROUNDUP({_full(model)}*{SLOTS}*{model.full_bits}/8,0)"
             f"+ROUNDUP([sliding_layers]*{HELD_SLOTS}*[kv_bits_layer]/8,0)")
    if model.kinds.chunked:
        terms += f"+ROUNDUP([chunked_layers]*{CHUNK_SLOTS}*[kv_bits_layer]/8,0)"
    return (f"SUMPRODUCT(load_requests,{terms})-IF(AND(shared_prefix_slot_tokens>0,requests>1),"
            f"ROUNDUP({_full(model)}*shared_prefix_slot_tokens*{model.full_bits}/8,0)"
            "*(requests-1),0)")


def _cache_rows(model: RankModel) -> list[tuple]:
    """The indexer K and the fixed states on this rank, and one request's caches."""
    kinds, rows = model.kinds, []
    if kinds.indexer:
        rows += [("indexer_bytes_per_token", "indexer K per token", style.BYTES,
                  f"[layers]*{INDEXER_LAYER_BYTES}"),
                 ("indexer_cache", "indexer K cache in use", style.BYTES,
                  f"SUMPRODUCT(load_requests,{SLOTS})*[indexer_bytes_per_token]")]
    if kinds.state:
        rows += [("state_layer_bytes", "fixed state per layer on this rank", style.BYTES,
                  state_layer_bytes("tensor_parallel_size")),
                 ("state_bytes_per_request", "fixed state per request", style.BYTES,
                  "[state_layers]*[state_layer_bytes]"),
                 ("state_cache", "fixed state in use", style.BYTES,
                  "requests*[state_bytes_per_request]")]
    if kinds.indexer or kinds.state:
        one = "[kv_request_context]" + extra_per_request(
            "context_tokens", kinds, "[state_bytes_per_request]", "[indexer_bytes_per_token]")
        rows.append(("cache_bytes_per_request", "cache per request", style.BYTES,
                     f"IF(explicit_lengths,ROUNDUP({model.caches}/requests,0),{one})"))
    return rows


def _plain_rows(model: RankModel) -> list[tuple]:
    per_request = "[cache_bytes_per_request]" if model.caches != "[kv_cache]" \
        else "[kv_bytes_per_request]"
    return [
        ("safety", "safety reserve", style.BYTES, "safety_bytes"),
        ("committed", "committed + reserved", style.BYTES, f"[fixed]+{model.caches}+[safety]"),
        ("free", "left", style.BYTES, "device_bytes-[committed]"),
        ("free_own", "left (binding order)", style.BYTES, "[free]"),
        ("ceiling", "memory-only ceiling", style.REQUESTS,
         f"IF({per_request}>0,MAX(0,INT((device_bytes-[fixed]-[safety])/{per_request})),0)"),
        ("order", "binding order (fewest first)", style.COUNT, "[ceiling]"),
        ("fits", "declared load fits", style.BOOL, "[free]>=0")]


def _page_rows(engine: str, kinds: Kinds = PURE) -> list[tuple]:
    """One page per layer kind (vLLM: block x one layer's token, group_layers tensors per
    block id; the other engines: a block of every layer, each at its own shape where layers
    have their own, ledger.engines._token_bytes)."""
    vllm = engine == VLLM
    page = "block_size_tokens*INT([kv_bits_layer]/8)"
    every = "block_size_tokens*[kv_bytes_per_token]" if kinds.own_shapes else f"{page}*[layers]"
    return [
        ("block_bytes", "bytes per block", style.BYTES,
         f"{page}*[group_layers]" if vllm else every),
        ("own_blocks", "blocks this rank's pool fits", style.BLOCKS,
         f"IF(AND([kv_pool_bytes]>0,{page}>0,[group_layers]>0),INT(INT([kv_pool_bytes]/({page}))"
         "/[group_layers]),0)" if vllm else
         "IF([block_bytes]>0,INT([kv_pool_bytes]/[block_bytes]),0)"),
        ("num_gpu_blocks", "blocks (every rank: the fewest)", style.BLOCKS, "MIN(<own_blocks>)"),
        ("num_groups", "KV cache groups", style.COUNT,
         "[full_groups]+[sliding_groups]" if vllm else "1"),
        ("blocks_per_request", "blocks one request reserves", style.BLOCKS,
         "[full_groups]*" + request_pages(FULL, "block_size_tokens") + "+[sliding_groups]*"
         + request_pages(SLIDING, "block_size_tokens") if vllm
         else request_pages(FULL, "block_size_tokens"))]


def _hybrid_page_rows(model: RankModel) -> list[tuple]:
    """vLLM's hybrid page arithmetic (ledger.hybrid.layout): the attention block raised until
    a page holds a state, one page size for every group, the blocks one request reserves."""
    kinds, rows = model.kinds, []
    windowed = "INT([kv_bits_layer]/8)"  # bytes of one token in one layer of each kind
    token = {FULL: f"INT({model.full_bits}/8)", SLIDING: windowed, CHUNKED: windowed,
             "indexer": INDEXER_LAYER_BYTES}
    block = "[attention_block_size]"
    if kinds.state:
        first = token[FULL] if model.first_attention_full else token[SLIDING]
        rows.append(("one_token_bytes", "one attention token in one layer", style.BYTES, first))
        raised = raised_block("[state_layer_bytes]", "[one_token_bytes]")
    rows.append(("attention_block_size", "attention block size", style.TOKENS,
                 raised if kinds.state else "block_size_tokens"))
    attention = [k for k in dict.fromkeys(model.group_kinds) if k != "state"]
    if model.uniform:  # UniformTypeKVCacheSpecs: one group, a page is every layer's page
        layers = f"[full_layers]*{token[FULL]}" + (f"+[layers]*{INDEXER_LAYER_BYTES}"
                                                    if kinds.indexer else "")
        rows += [("page_bytes", "page (one block of every layer)", style.BYTES,
                  f"{block}*({layers})"),
                 ("blocks_per_request", "blocks one request reserves", style.BLOCKS,
                  request_pages(FULL, block))]
    else:
        pages = [f"{block}*{token[k]}" for k in attention]
        state = f"MAX([state_layer_bytes],{block}*[one_token_bytes])"
        largest = "MAX(" + ",".join(pages + [state] * kinds.state) + ")"
        page = f"IF({state}<{largest},NA(),{largest})" if kinds.state else largest
        rows.append(("page_bytes", "page (every group's, padded)", style.BYTES, page))
        for kind in attention:
            rows.append((f"{kind}_block_size", f"{kind} layers' block", style.TOKENS,
                         unified_block("[page_bytes]", block, token[kind])))
        per_group = [f"[{k}_groups]*" + request_pages(k, f"[{k}_block_size]") for k in attention]
        per_group += ["[state_groups]*" + request_pages("state", block)] * kinds.state
        rows.append(("blocks_per_request", "blocks one request reserves", style.BLOCKS,
                     "+".join(per_group)))
    return rows + [
        ("block_bytes", "bytes per block", style.BYTES, "[page_bytes]*[group_layers]"),
        ("own_blocks", "blocks this rank's pool fits", style.BLOCKS,
         "IF(AND([kv_pool_bytes]>0,[page_bytes]>0,[group_layers]>0),"
         "INT(INT([kv_pool_bytes]/[page_bytes])/[group_layers]),0)"),
        ("num_gpu_blocks", "blocks (every rank: the fewest)", style.BLOCKS, "MIN(<own_blocks>)"),
        ("num_groups", "KV cache groups", style.COUNT,
         "+".join(f"[{k}_groups]" for k in dict.fromkeys(model.group_kinds)))]


def _budget_rows(model: RankModel) -> list[tuple]:
    vllm, caches = model.engine == VLLM, model.caches
    block = "[attention_block_size]" if model.vllm_hybrid else "block_size_tokens"
    tokens = "INT([max_concurrency]*context_tokens)" if vllm and model.tokens_from_concurrency \
        else f"INT([num_gpu_blocks]/[num_groups])*{block}"
    return [
        ("max_concurrency", "max concurrency", "0.00",
         f"[num_gpu_blocks]*{block}/context_tokens" if vllm and model.concurrency_v0 else
         "IF([blocks_per_request]>0,[num_gpu_blocks]/[blocks_per_request],0)" if vllm
         else f"INT([num_gpu_blocks]/[num_groups])*{block}/context_tokens"),
        ("kv_cache_tokens", "KV cache tokens", style.TOKENS, tokens),
        ("kv_pool_spare", "KV pool, unused blocks", style.BYTES,
         f"MAX([num_gpu_blocks]*[block_bytes]-{caches},0)"),
        ("safety", "headroom outside the engine budget", style.BYTES, "MAX([headroom],0)"),
        ("committed", "committed + reserved", style.BYTES,
         f"[fixed]+{caches}+[kv_pool_spare]+[safety]"),
        ("free", "left", style.BYTES, "device_bytes-[committed]"),
        ("free_own", "left at this rank's own blocks (binding order)", style.BYTES,
         f"device_bytes-[fixed]-{caches}-MAX([own_blocks]*[block_bytes]-{caches},0)-[safety]"),
        ("ceiling", "max concurrency, whole requests", style.REQUESTS, "INT([max_concurrency])"),
        ("order", "binding order (fewest first)", style.BLOCKS, "[own_blocks]"),
        *(_start_rows() if vllm else ()),
        ("fits", "declared load fits", style.BOOL,
         f"AND([free]>=0,{caches}<=[num_gpu_blocks]*[block_bytes]"
         + (",[starts])" if vllm else ")"))]


def _start_rows() -> tuple[tuple, ...]:
    """vLLM's start: its pool holds one max_model_len request (ledger.engines.starts), and what
    it runs after sizing the pool fits what is left (ledger.vllm_after.after_pool: room =
    device - what stays allocated - this rank's own pool - what precedes the baseline)."""
    return (
        ("after_pool_room", "after the pool: room left", style.BYTES,
         f"device_bytes-({HELD})-[own_blocks]*[block_bytes]-[after_pool_outside]"),
        ("starts", "vLLM starts (pool holds a request; graphs + warm-up fit)", style.BOOL,
         "AND([kv_pool_bytes]>0,[num_gpu_blocks]>=MAX([blocks_per_request],1),"
         "[after_pool_graphs]+[after_pool_warmup]<=[after_pool_room])"))
