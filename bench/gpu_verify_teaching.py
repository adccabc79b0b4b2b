"""GPU check: verify seed 000's teaching 7B plan (40 GiB, 4,096 tokens, 16 requests) on one GPU.

    python bench/gpu_verify_teaching.py                      # cuda:0, emulated 40 GiB
    python bench/gpu_verify_teaching.py --json-out out.json  # also keep the reconciliation
    python bench/gpu_verify_teaching.py --dry-run --json-out out.json  # CPU: plans only

The GPU may be larger than 40 GiB: the per-process memory fraction makes it a 40 GiB device and
the ledger is planned against that size. The seed states only a parameter count, so the run
uses bench/teaching-7b-llama.yaml (the same layers, KV heads and head_dim; its parameter count
differs and is printed first). Exit 0 when every ledger line held, 1 when one was violated,
2 when no GPU is available.
"""

import argparse
import sys
from pathlib import Path

from rich.console import Console

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_verify_runs import add_output_args, run_main, timed_verify, write_json

from servecap.cli.inputs import PlanFlags, serve_spec
from servecap.cli.verify_cmd import VerifyFlags
from servecap.ledger.plan import build_plan
from servecap.ledger.units import GiB
from servecap.model_configs import load_model

ARCH = Path(__file__).with_name("teaching-7b-llama.yaml")


def compare_parameters(console: Console) -> dict:
    """The seed's 7B against the architecture the runtime builds, line by line."""
    rows = []
    for ref in ("teaching-7b", str(ARCH)):
        loaded = load_model(ref)
        plan = build_plan(loaded.spec, serve_spec(PlanFlags(), loaded))
        rows.append((loaded.spec.name, plan))
    (seed_name, seed), (arch_name, arch) = rows
    extra = arch.num_parameters - seed.num_parameters
    console.print(f"seed 000 '{seed_name}': {seed.num_parameters:,} params (stated), "
                  f"{seed.line('weights') / GiB:.2f} GiB of bf16 weights")
    console.print(f"runtime '{arch_name}': {arch.num_parameters:,} params (counted from "
                  f"32 x (attention + MLP) + embeddings + lm_head), "
                  f"{arch.line('weights') / GiB:.2f} GiB")
    console.print(f"difference: {extra:+,} params = {2 * extra / GiB:+.2f} GiB of weights: the "
                  "seed rounds a 7B model to 7.0e9; a real 32-layer, 4096-wide model with a "
                  "14336 MLP and 32000 vocabulary has 7.24e9. KV bytes per token are equal "
                  f"({seed.kv_bytes_per_token:,} vs {arch.kv_bytes_per_token:,} B), so the "
                  f"memory ceilings are {seed.memory_ceiling_requests} vs "
                  f"{arch.memory_ceiling_requests} requests of 4,096 tokens.")
    return {"seed_parameters": seed.num_parameters, "runtime_parameters": arch.num_parameters,
            "seed_ceiling_requests": seed.memory_ceiling_requests,
            "runtime_ceiling_requests": arch.memory_ceiling_requests,
            "kv_bytes_per_token": arch.kv_bytes_per_token}


def run(args: argparse.Namespace) -> int:
    console = Console(width=140)
    figures = {"plans": compare_parameters(console)}
    if args.dry_run:
        write_json(args.json_out, {**figures, "dry_run": True})
        return 0
    flags = PlanFlags(device=args.device_memory, context=4096, concurrency=16,
                      runtime_peak="3GiB", safety="4GiB")
    vflags = VerifyFlags(device=args.device, device_memory=args.device_memory,
                         num_layers=args.num_layers, output_tokens=args.output_tokens)
    verified, violated = timed_verify(str(ARCH), flags, vflags, console)
    write_json(args.json_out, {**figures, **verified})
    if verified["violations"]:
        console.print("violated: " + ", ".join(verified["violations"]))
    return 1 if violated else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--device-memory", default="40GiB")
    parser.add_argument("--output-tokens", type=int, default=16)
    parser.add_argument("--num-layers", type=int, default=None,
                        help="a scaled-down smoke run (the ledger scales the same way)")
    add_output_args(parser, "compare the plans and write them; run nothing (any machine)")
    run_main("gpu_verify_teaching", parser, run)


if __name__ == "__main__":
    main()
