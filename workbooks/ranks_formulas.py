"""The Ranks sheet's rows: each line of one rank's ledger and engine budget as a formula.

`[key]` is this rank's cell of that row, `<key>` the whole row across ranks; the rest are the
workbook's named inputs. The arithmetic is ledger.engines' and ledger.kv's, cell for cell.
"""

from servecap.ledger.engines import PLAIN, SGLANG, TRTLLM, VLLM

from . import style

FIXED = (("weights", "weights"), ("weight_metadata", "weight metadata"),
         ("weights_resident", "weight layout in vLLM (beyond the checkpoint)"),
         ("runtime_peak", "runtime peak"), ("rotary_cache", "rotary cos/sin cache"),
         ("non_torch", "non-torch memory"), ("comm_buffers", "communication buffers"),
         ("cuda_graphs", "CUDA graph pool"))
BITS = ('IF(attention_kind="mla",(kv_lora_rank+qk_rope_head_dim)*kv_bits_per_element,'
        "2*[kv_heads]*head_dim*kv_bits_per_element)")
# a windowed layer holds min(ceil(S/B), ceil(min(W-1+T, S)/B) + 1) blocks at its peak, its
# prefill in flight (ledger.paging.windowed_blocks); over the load's lengths min(a, b) is written
# a - (a>b)(a-b), as MIN would aggregate the array
SPAN = "(sliding_window_tokens-1+max_num_batched_tokens)"
LENGTHS_SPAN = f"(load_lengths_tokens-(load_lengths_tokens>{SPAN})*(load_lengths_tokens-{SPAN}))"
WINDOW_SLOTS = f"(ROUNDUP({LENGTHS_SPAN}/block_size_tokens,0)+1)*block_size_tokens"
SLOTS = "ROUNDUP(load_lengths_tokens/block_size_tokens,0)*block_size_tokens"
HELD_SLOTS = (f"({SLOTS}-(sliding_window_tokens>0)*({SLOTS}>{WINDOW_SLOTS})"
              f"*({SLOTS}-{WINDOW_SLOTS}))")
KV_IN_USE = (
    f"SUMPRODUCT(load_requests,ROUNDUP(([layers]-[sliding_layers])*{SLOTS}*[kv_bits_layer]/8,0)"
    f"+ROUNDUP([sliding_layers]*{HELD_SLOTS}*[kv_bits_layer]/8,0))"
    "-IF(AND(shared_prefix_slot_tokens>0,requests>1),ROUNDUP(([layers]-[sliding_layers])*"
    "shared_prefix_slot_tokens*[kv_bits_layer]/8,0)*(requests-1),0)")
SLOTS_ONE = "ROUNDUP(context_tokens/block_size_tokens,0)*block_size_tokens"
WINDOW_ONE = (f"(ROUNDUP(MIN({SPAN},context_tokens)/block_size_tokens,0)+1)"
              "*block_size_tokens")
HELD_ONE = f"IF(sliding_window_tokens>0,MIN({SLOTS_ONE},{WINDOW_ONE}),{SLOTS_ONE})"
KV_REQUEST = (
    f"ROUNDUP(([layers]-[sliding_layers])*{SLOTS_ONE}*[kv_bits_layer]/8,0)"
    f"+ROUNDUP([sliding_layers]*{HELD_ONE}*[kv_bits_layer]/8,0)")
WEIGHTS = "([weights]+[weight_metadata]+[weights_resident]+[rotary_cache])"
POOL = {
    VLLM: ("IF(ISNUMBER(kv_cache_memory_bytes),kv_cache_memory_bytes,TRUNC(device_bytes*"
           f"gpu_memory_utilization-({WEIGHTS}+[runtime_peak]+[non_torch]+[comm_buffers]"
           "+[cuda_graphs])))"),
    SGLANG: f"TRUNC([free_start]*mem_fraction_static)-{WEIGHTS}",
    TRTLLM: "TRUNC([free_start]*free_gpu_memory_fraction)",
}
HEADROOM = {
    VLLM: (f"IF(ISNUMBER(kv_cache_memory_bytes),device_bytes-{WEIGHTS}-[runtime_peak]-[non_torch]"
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
SLIDING_BLOCKS = ("IF(sliding_window_tokens>0,ROUNDUP(MIN(sliding_window_tokens-1+"
                  "max_num_batched_tokens,context_tokens)/block_size_tokens,0)+1,"
                  "ROUNDUP(context_tokens/block_size_tokens,0))")


def rank_rows(engine: str) -> list[tuple[str, str, str | None, str]]:
    """(key, label, number format, formula or '' for a value)."""
    vllm = engine == VLLM
    rows = [("kv_heads", "KV heads on this rank", style.HEADS,
             'IF(attention_kind="mla",0,ROUNDUP(num_kv_heads/tensor_parallel_size,0))'),
            ("kv_bits_layer", "KV per token per layer", style.BITS, BITS),
            ("kv_bytes_per_token", "KV per token", style.BYTES,
             "ROUNDUP([layers]*[kv_bits_layer]/8,0)"),
            ("kv_request_context", "KV per request at context", style.BYTES, KV_REQUEST),
            ("kv_cache", "KV cache in use", style.BYTES, KV_IN_USE),
            ("kv_bytes_per_request", "KV per request", style.BYTES,
             "IF(explicit_lengths,ROUNDUP([kv_cache]/requests,0),[kv_request_context])")]
    if engine == PLAIN:
        return rows + [
            ("safety", "safety reserve", style.BYTES, "safety_bytes"),
            ("committed", "committed + reserved", style.BYTES, "[fixed]+[kv_cache]+[safety]"),
            ("free", "left", style.BYTES, "device_bytes-[committed]"),
            ("free_own", "left (binding order)", style.BYTES, "[free]"),
            ("ceiling", "memory-only ceiling", style.REQUESTS,
             "IF([kv_bytes_per_request]>0,MAX(0,INT((device_bytes-[fixed]-[safety])/"
             "[kv_bytes_per_request])),0)"),
            ("order", "binding order (fewest first)", style.COUNT, "[ceiling]"),
            ("fits", "declared load fits", style.BOOL, "[free]>=0")]
    if engine in FREE_START:
        rows.append(("free_start", "memory the engine sizes from", style.BYTES,
                     FREE_START[engine]))
    page = "block_size_tokens*INT([kv_bits_layer]/8)"
    rows += [
        ("pool", "KV pool as sized", style.BYTES, POOL[engine]),
        ("kv_pool_bytes", "KV pool", style.BYTES, "MAX([pool],0)"),
        ("headroom", "outside the engine budget", style.BYTES, HEADROOM[engine]),
        ("block_bytes", "bytes per block", style.BYTES,
         f"{page}*" + ("[group_layers]" if vllm else "[layers]")),
        ("own_blocks", "blocks this rank's pool fits", style.BLOCKS,
         f"IF(AND([kv_pool_bytes]>0,{page}>0,[group_layers]>0),INT(INT([kv_pool_bytes]/({page}))"
         "/[group_layers]),0)" if vllm else
         "IF([block_bytes]>0,INT([kv_pool_bytes]/[block_bytes]),0)"),
        ("num_gpu_blocks", "blocks (every rank: the fewest)", style.BLOCKS, "MIN(<own_blocks>)"),
        ("num_groups", "KV cache groups", style.COUNT,
         "[full_groups]+[sliding_groups]" if vllm else "1"),
        ("kv_cache_tokens", "KV cache tokens", style.TOKENS,
         "INT([num_gpu_blocks]/[num_groups])*block_size_tokens"),
        ("blocks_per_request", "blocks one request reserves", style.BLOCKS,
         "[full_groups]*ROUNDUP(context_tokens/block_size_tokens,0)+[sliding_groups]*"
         + SLIDING_BLOCKS if vllm else "ROUNDUP(context_tokens/block_size_tokens,0)"),
        ("max_concurrency", "max concurrency", "0.00",
         "IF([blocks_per_request]>0,[num_gpu_blocks]/[blocks_per_request],0)" if vllm
         else "[kv_cache_tokens]/context_tokens"),
        ("kv_pool_spare", "KV pool, unused blocks", style.BYTES,
         "MAX([num_gpu_blocks]*[block_bytes]-[kv_cache],0)"),
        ("safety", "headroom outside the engine budget", style.BYTES, "MAX([headroom],0)"),
        ("committed", "committed + reserved", style.BYTES,
         "[fixed]+[kv_cache]+[kv_pool_spare]+[safety]"),
        ("free", "left", style.BYTES, "device_bytes-[committed]"),
        ("free_own", "left at this rank's own blocks (binding order)", style.BYTES,
         "device_bytes-[fixed]-[kv_cache]-MAX([own_blocks]*[block_bytes]-[kv_cache],0)-[safety]"),
        ("ceiling", "max concurrency, whole requests", style.REQUESTS, "INT([max_concurrency])"),
        ("order", "binding order (fewest first)", style.BLOCKS, "[own_blocks]"),
        ("fits", "declared load fits", style.BOOL,
         "AND([free]>=0,[kv_cache]<=[num_gpu_blocks]*[block_bytes])")]
    return rows
