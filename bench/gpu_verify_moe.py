"""GPU check: verify three MoE families on one GPU: routed experts, latent attention, sinks.

    python bench/gpu_verify_moe.py --json-out out.json            # cuda:0, all three
    python bench/gpu_verify_moe.py --dry-run --json-out out.json  # any machine: plans only

The bundled Qwen3-30B-A3B (128 experts, top-8, softmax), DeepSeek-V3 (latent attention; 256
experts in 8 groups, sigmoid with the correction bias, a shared expert; its FP8 checkpoint's
shape run in bf16, --weight-dtype bf16) and gpt-oss-20b (sinks, alternating 128-token windows,
32 biased experts with the clamped SwiGLU; its MXFP4 shape in bf16), each cut to its first
--num-layers layers (DeepSeek-V3: its three dense layers and its first MoE layer), seeded
random bf16 weights through torch's grouped matmul, on an emulated device sized so that about
--ceiling requests of the context fit beside the weights (the probe stays short): every ledger
line and the ceiling are reconciled. Exit 0 when every line held for all three, 1 when one was
violated, 2 when no GPU is available.
"""

import argparse
import sys
from pathlib import Path

from rich.console import Console

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_verify_runs import add_load_args, add_output_args, run_main, verify_all, write_json

from servecap.cli.inputs import PlanFlags, model_for_flags, serve_spec
from servecap.cli.verify_cmd import VerifyFlags
from servecap.ledger.arch import routed_layers
from servecap.ledger.plan import build_plan
from servecap.ledger.units import MiB
from servecap.model_configs import load_model

MODELS = {"qwen3_30b_a3b": ("qwen3-30b-a3b", 2), "deepseek_v3": ("deepseek-v3", 4),
          "gpt_oss_20b": ("gpt-oss-20b", 2)}  # name -> (bundled model, layers run)
SAFETY = 0.10


def _flags(args: argparse.Namespace, device: str | None = None) -> PlanFlags:
    return PlanFlags(device=device, context=args.context, concurrency=args.concurrency,
                     safety=f"{SAFETY:.0%}", weight_dtype="bf16",
                     max_num_batched_tokens=args.max_num_batched_tokens)


def sized_plan(model: str, layers: int, args: argparse.Namespace) -> dict:
    """The device each model runs on: its weights, runtime peak and --ceiling requests of
    KV (and state) over 1 - safety, rounded up to a MiB; and the plan there."""
    from servecap.runtime.model import with_num_layers

    loaded = load_model(model)
    spec = with_num_layers(model_for_flags(_flags(args), loaded), layers)
    serve = serve_spec(_flags(args, "1TiB"), loaded)
    plan = build_plan(spec, serve)
    per_request = plan.kv_bytes_per_request + plan.state_bytes_per_request
    need = plan.line("weights") + plan.line("runtime_peak") + args.ceiling * per_request
    device = -(-int(need / (1 - SAFETY)) // MiB) * MiB
    sized = build_plan(spec, serve_spec(_flags(args, f"{device // MiB}MiB"), loaded))
    return {"device_memory": f"{device // MiB}MiB", "weights_bytes": sized.line("weights"),
            "runtime_peak_bytes": sized.line("runtime_peak"),
            "kv_bytes_per_request": sized.kv_bytes_per_request,
            "memory_ceiling_requests": sized.memory_ceiling_requests,
            "routed_layers": list(routed_layers(spec))}


def run(args: argparse.Namespace) -> int:
    console = Console(width=140)
    plans = {name: sized_plan(model, layers, args) for name, (model, layers) in MODELS.items()}
    for name, plan in plans.items():
        console.print(f"{name}: {plan}")
    figures = {"plans": plans}
    if args.dry_run:
        write_json(args.json_out, {**figures, "dry_run": True})
        return 0
    runs = {name: (model, _flags(args),
                   VerifyFlags(device=args.device, device_memory=plans[name]["device_memory"],
                               num_layers=layers, output_tokens=args.output_tokens))
            for name, (model, layers) in MODELS.items()}
    return verify_all(runs, console, figures, args.json_out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda:0")
    add_load_args(parser)
    parser.add_argument("--output-tokens", type=int, default=16)
    parser.add_argument("--ceiling", type=int, default=24,
                        help="requests of the context the emulated device is sized to hold")
    add_output_args(parser, "plan the three models and write the figures; run nothing")
    run_main("gpu_verify_moe", parser, run)


if __name__ == "__main__":
    main()
