"""GPU check: verify the hybrids' state line on one GPU, a Mamba-2 and a gated-DeltaNet model.

    python bench/gpu_verify_hybrid.py --json-out out.json            # cuda:0, both models
    python bench/gpu_verify_hybrid.py --dry-run --json-out out.json  # any machine: plans only

Nemotron-H-56B (the official config.json kept in tests/fixtures/configs: Mamba-2, attention and
MLP blocks, no experts) and bench/qwen3-next-dense.yaml (Qwen3-Next-80B's gated DeltaNet and
attention widths, dense MLPs), each cut to its first --num-layers layers (the ledger plans the
cut model the same way), seeded random bf16 weights, on an emulated --device-memory device:
the state pool, the fixed state in use (state_bytes_per_request x live requests, exactly) and
the memory ceiling are reconciled beside every other line. Exit 0 when every line held for both,
1 when one was violated, 2 when no GPU is available.
"""

import argparse
import sys
from pathlib import Path

from rich.console import Console

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_verify_runs import add_load_args, add_output_args, run_main, verify_all, write_json

from servecap.cli.inputs import PlanFlags, serve_spec
from servecap.cli.verify_cmd import VerifyFlags
from servecap.ledger.plan import build_plan
from servecap.model_configs import load_model

REPO = Path(__file__).resolve().parents[1]
MODELS = {
    "nemotron_h_56b": REPO / "tests/fixtures/configs/nvidia--Nemotron-H-56B-Base-8K/config.json",
    "qwen3_next_dense": REPO / "bench/qwen3-next-dense.yaml",
}


def _flags(args: argparse.Namespace) -> PlanFlags:
    return PlanFlags(device=args.device_memory, context=args.context,
                     concurrency=args.concurrency, safety="10%",
                     max_num_batched_tokens=args.max_num_batched_tokens)


def plan_only(args: argparse.Namespace, console: Console) -> dict:
    """The plans the GPU run reconciles: state per request, KV per request, the ceiling."""
    from servecap.runtime.model import with_num_layers

    out = {}
    for name, path in MODELS.items():
        loaded = load_model(str(path))
        spec = with_num_layers(loaded.spec, args.num_layers)
        plan = build_plan(spec, serve_spec(_flags(args), loaded))
        out[name] = {"state_bytes_per_request": plan.state_bytes_per_request,
                     "kv_bytes_per_request": plan.kv_bytes_per_request,
                     "state_bytes_total": plan.line("state_cache"),
                     "memory_ceiling_requests": plan.memory_ceiling_requests}
        console.print(f"{name}: {out[name]}")
    return out


def run(args: argparse.Namespace) -> int:
    console = Console(width=140)
    figures = {"plans": plan_only(args, console)}
    if args.dry_run:
        write_json(args.json_out, {**figures, "dry_run": True})
        return 0
    vflags = VerifyFlags(device=args.device, device_memory=args.device_memory,
                         num_layers=args.num_layers, output_tokens=args.output_tokens)
    runs = {name: (str(path), _flags(args), vflags) for name, path in MODELS.items()}
    return verify_all(runs, console, figures, args.json_out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--device-memory", default="16GiB")
    add_load_args(parser)
    parser.add_argument("--output-tokens", type=int, default=16)
    parser.add_argument("--num-layers", type=int, default=8,
                        help="the first N layers of each model (8: Nemotron-H's first "
                             "attention block is its 8th)")
    add_output_args(parser,
                    "plan both models and write the figures; run nothing (any machine)")
    run_main("gpu_verify_hybrid", parser, run)


if __name__ == "__main__":
    main()
