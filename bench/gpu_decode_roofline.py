"""Decode tokens/s of an 8B shape (Llama-3.1-8B layers, 8 of its 32) against the memory
bandwidth roofline, at batch 1 and 32, as JSON.

    python bench/gpu_decode_roofline.py --json-out decode.json           # needs CUDA
    python bench/gpu_decode_roofline.py --dry-run --json-out decode.json # CPU, tiny shape

The roofline of a decode step is (weights read + KV read) / measured copy bandwidth (a 1 GiB
device-to-device copy: read + write bytes / s). Weights read excludes the input embedding
(a step reads only `batch` of its rows). --dry-run runs the same code on the CPU with a
small shape, to check the script, not to measure anything.
"""

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from runtime_decode import SMALL, copy_bandwidth_bytes_per_s, decode_times  # noqa: E402

from servecap.ledger.kv import kv_bytes_per_token  # noqa: E402
from servecap.ledger.model import Attention, ModelSpec  # noqa: E402
from servecap.ledger.weights import weight_bytes  # noqa: E402

LLAMA_8B_8_LAYERS = ModelSpec(name="llama-3.1-8b shape, 8 of 32 layers", source="bench",
                              num_layers=8, attention=Attention("gqa", 32, 8, 128),
                              hidden_size=4096, intermediate_size=14336, vocab_size=128256,
                              model_type="llama")


def measure(spec: ModelSpec, batch: int, context: int, dtype: str, device: str,
            bandwidth_bytes_per_s: float, repeats: int) -> dict:
    bits = 16 if dtype == "bf16" else 32
    paged_s, dense_s, *_transients = decode_times(spec, batch, context, dtype, device,
                                                  repeats=repeats)
    embedding_bytes = spec.vocab_size * spec.hidden_size * bits // 8
    model_bytes = weight_bytes(spec, bits, None).param_bytes - embedding_bytes
    kv_bytes = batch * context * kv_bytes_per_token(spec, bits)
    roofline_s = (model_bytes + kv_bytes) / bandwidth_bytes_per_s
    return {"batch": batch, "context_tokens": context, "dtype": dtype,
            "weights_read_bytes": model_bytes, "kv_read_bytes": kv_bytes,
            "paged_step_s": paged_s, "dense_step_s": dense_s,
            "paged_tokens_per_s": batch / paged_s, "roofline_step_s": roofline_s,
            "roofline_tokens_per_s": batch / roofline_s,
            "share_of_roofline": roofline_s / paged_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json-out", required=True)
    parser.add_argument("--context", type=int, default=1024)
    parser.add_argument("--batches", default="1,32")
    parser.add_argument("--dry-run", action="store_true", help="CPU, small shape, 2 repeats")
    args = parser.parse_args()
    if not args.dry_run and not torch.cuda.is_available():
        raise SystemExit("gpu_decode_roofline: no CUDA device here (use --dry-run on a CPU)")
    device, dtype = ("cpu", "fp32") if args.dry_run else ("cuda", "bf16")
    spec = SMALL if args.dry_run else LLAMA_8B_8_LAYERS
    context = min(args.context, 64) if args.dry_run else args.context
    bandwidth = copy_bandwidth_bytes_per_s(device, 1 << 24 if args.dry_run else 1 << 30)
    rows = [measure(spec, int(b), context, dtype, device, bandwidth, 2 if args.dry_run else 20)
            for b in args.batches.split(",")]
    out = {"device": torch.cuda.get_device_name() if device == "cuda" else "cpu (dry run)",
           "model": spec.name, "copy_bandwidth_bytes_per_s": bandwidth,
           "torch_version": torch.__version__, "cuda_version": torch.version.cuda,
           "results": rows}
    Path(args.json_out).write_text(json.dumps(out, indent=2))
    for row in rows:
        print(f"batch {row['batch']}: {row['paged_tokens_per_s']:,.0f} tokens/s paged, "
              f"roofline {row['roofline_tokens_per_s']:,.0f} tokens/s "
              f"({row['share_of_roofline']:.0%} of it)")


if __name__ == "__main__":
    main()
