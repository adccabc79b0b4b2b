"""Decode step time: the paged KV path against a contiguous-cache reference, and on CUDA the
decode rate against the memory-bandwidth roofline.

    .venv/bin/python bench/runtime_decode.py            # CPU: paged vs dense, batch 16 x 1,024
    .venv/bin/python bench/runtime_decode.py --cuda     # also the GPU roofline (needs CUDA)
"""

import argparse
import statistics
import time

import torch

from servecap.ledger.kv import kv_bytes_per_token
from servecap.ledger.model import Attention, ModelSpec
from servecap.ledger.paging import blocks_for
from servecap.ledger.weights import weight_bytes
from servecap.runtime.attention import PagedKV
from servecap.runtime.attention_reference import DenseKV
from servecap.runtime.block_manager import BlockManager
from servecap.runtime.kv_pool import KVPool
from servecap.runtime.model import torch_dtype
from servecap.runtime.runner import build_batch
from servecap.runtime.sequence import RequestRecord, Sequence
from servecap.runtime.telemetry import AllocatorCounter
from servecap.runtime.weights import random_decoder

SMALL = ModelSpec(name="small-llama", source="bench", num_layers=8,
                  attention=Attention("gqa", 8, 4, 64), hidden_size=512,
                  intermediate_size=1536, vocab_size=8192, model_type="llama")
# The same width with Llama-3's 4:1 query-to-KV head ratio: KV is a smaller share of each step.
SMALL_GQA4 = ModelSpec(name="small-llama-gqa4", source="bench", num_layers=8,
                       attention=Attention("gqa", 8, 2, 64), hidden_size=512,
                       intermediate_size=1536, vocab_size=8192, model_type="llama")


def _sequences(batch: int, context: int, blocks: BlockManager,
               interleaved: bool) -> list[Sequence]:
    """`batch` sequences whose first context - 1 tokens are already in the pool. Allocated
    whole, each holds consecutive blocks; grown a block at a time in turn (as concurrent
    decodes grow), their blocks interleave and must be gathered."""
    seqs = []
    for i in range(batch):
        tokens = [(7 * i + t) % SMALL.vocab_size for t in range(context)]
        seq = Sequence(i, tokens, context - 1, 1, 0.0, 0, RequestRecord(i, context - 1, 1))
        blocks.allocate(i, tokens[:1] if interleaved else tokens)
        seq.num_computed_tokens = context - 1
        seqs.append(seq)
    bsz = blocks.block_size_tokens
    for start in range(bsz, context if interleaved else 0, bsz):
        for seq in seqs:
            blocks.prepare_write(seq.seq_id, start, min(start + bsz, context))
    return seqs


def _once(fn) -> float:
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - start


def _time(fn, repeats: int) -> float:
    """Median seconds of fn() after two warm-up calls (synchronised on CUDA)."""
    for _ in range(2):
        fn()
    return statistics.median(_once(fn) for _ in range(repeats))


def _time_pair(first, second, repeats: int) -> tuple[float, float]:
    """Medians of two functions timed alternately, so load from other processes hits both."""
    for _ in range(2):
        first(), second()
    pairs = [(_once(first), _once(second)) for _ in range(repeats)]
    return statistics.median(a for a, _ in pairs), statistics.median(b for _, b in pairs)


def peak_transient_bytes(fn) -> int:
    """Bytes the CPU allocator holds at the highest point of one call, beyond what it held
    before (telemetry's AllocatorCounter: allocations inside fused ops count too)."""
    counter = AllocatorCounter()
    with counter:
        fn()
    return counter.peak_bytes


@torch.inference_mode()
def decode_times(spec: ModelSpec, batch: int, context: int, dtype: str, device: str,
                 block_size: int = 16, repeats: int = 10,
                 interleaved: bool = False) -> tuple[float, float, int, int]:
    """(paged, dense) seconds for one decode step of `batch` sequences at `context` tokens,
    then (paged, dense) peak transient bytes of one step on the CPU (0 on CUDA)."""
    model = random_decoder(spec, dtype, device)
    num_blocks = batch * blocks_for(context, block_size)
    pool = KVPool(spec, num_blocks, block_size, dtype, device)
    pool.tensor.normal_()
    blocks = BlockManager(num_blocks, block_size, enable_prefix_caching=False)
    chunks = [(seq, 1) for seq in _sequences(batch, context, blocks, interleaved)]

    def paged() -> torch.Tensor:
        ids, positions, layout = build_batch(chunks, blocks, pool, model.device)
        return model.logits(model(ids, positions, PagedKV(pool, layout)))

    att = spec.attention
    dense_kv = DenseKV(spec.num_layers, batch, context, att.num_kv_heads, att.head_dim,
                       torch_dtype(dtype), device)
    dense_kv.k.normal_()
    dense_kv.v.normal_()
    dense_kv.set_rows([(i, context - 1, 1) for i in range(batch)])
    ids = torch.tensor([s.token_ids[-1] for s, _ in chunks], device=device)
    positions = torch.full((batch,), context - 1, device=device)

    def dense() -> torch.Tensor:
        return model.logits(model(ids, positions, dense_kv))

    paged_s, dense_s = _time_pair(paged, dense, repeats)
    if device != "cpu":
        return paged_s, dense_s, 0, 0
    return paged_s, dense_s, peak_transient_bytes(paged), peak_transient_bytes(dense)


def cpu_report(batch: int, context: int) -> None:
    print(f"CPU decode step, fp32, batch {batch} x {context:,}-token contexts, "
          f"{torch.get_num_threads()} thread(s); median of alternating runs; transient bytes "
          "at the CPU allocator (MiB = 2^20 B)")
    for spec in (SMALL, SMALL_GQA4):
        att = spec.attention
        print(f"  {spec.name} ({spec.num_layers} layers, hidden {spec.hidden_size}, "
              f"{att.num_heads}/{att.num_kv_heads} q/kv heads)")
        for interleaved in (False, True):
            paged, dense, paged_b, dense_b = decode_times(spec, batch, context, "fp32", "cpu",
                                                          interleaved=interleaved)
            tables = "interleaved blocks " if interleaved else "consecutive blocks "
            print(f"    {tables}: paged {paged * 1e3:7.2f} ms, dense {dense * 1e3:7.2f} ms, "
                  f"paged/dense {paged / dense:.2f}x (target <= 1.30x); peak transient per "
                  f"step paged {paged_b / 2**20:.2f} MiB, dense {dense_b / 2**20:.2f} MiB")


def copy_bandwidth_bytes_per_s(device: str, num_bytes: int = 1 << 30) -> float:
    """Measured device-to-device copy: 2 x bytes moved (read + write) / seconds."""
    src = torch.empty(num_bytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    seconds = _time(lambda: dst.copy_(src), 5)
    return 2 * num_bytes / seconds


def gpu_report(batch: int, context: int) -> None:
    """Decode tokens/s against (weights + KV read per step) / measured copy bandwidth."""
    spec = ModelSpec(name="llama-3.1-8b-shape (8 layers)", source="bench", num_layers=8,
                     attention=Attention("gqa", 32, 8, 128), hidden_size=4096,
                     intermediate_size=14336, vocab_size=128256, model_type="llama")
    paged, dense, _, _ = decode_times(spec, batch, context, "bf16", "cuda", repeats=20)
    # a decode step reads every matrix once, but only `batch` rows of the input embedding
    embedding_bytes = spec.vocab_size * spec.hidden_size * 2
    model_bytes = weight_bytes(spec, 16, None).param_bytes - embedding_bytes
    kv_bytes = batch * context * kv_bytes_per_token(spec, 16)
    bandwidth = copy_bandwidth_bytes_per_s("cuda")
    roofline_s = (model_bytes + kv_bytes) / bandwidth
    print(f"GPU {torch.cuda.get_device_name()}: {spec.name}, bf16, batch {batch} x {context:,}")
    print(f"  measured copy bandwidth {bandwidth / 1e12:.2f} TB/s; bytes read per step "
          f"{(model_bytes + kv_bytes) / 2**30:.2f} GiB (weights but the input "
          "embedding, + KV)")
    print(f"  paged {paged * 1e3:.2f} ms/step = {batch / paged:,.0f} tokens/s; dense "
          f"{dense * 1e3:.2f} ms/step")
    print(f"  roofline {roofline_s * 1e3:.2f} ms/step = {batch / roofline_s:,.0f} tokens/s; "
          f"paged reaches {roofline_s / paged:.0%} of it")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--context", type=int, default=1024)
    parser.add_argument("--threads", type=int, default=1,
                        help="CPU threads (1 keeps figures stable on a shared machine)")
    parser.add_argument("--cuda", action="store_true", help="also run the GPU roofline check")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    cpu_report(args.batch, args.context)
    if args.cuda:
        if not torch.cuda.is_available():
            raise SystemExit("--cuda: no CUDA device here")
        gpu_report(args.batch, args.context)


if __name__ == "__main__":
    main()
