"""What the gpu_verify_* checks share: the timed verification of each model, the JSON they
write, their common flags and their exit on a bad input (2, one line on stderr)."""

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from servecap.cli.inputs import PlanFlags
from servecap.cli.verify_cmd import VerifyFlags, verify_from_flags
from servecap.cli.verify_json import verify_to_dict, violations
from servecap.cli.verify_view import render_verify
from servecap.ledger.errors import SpecError


def timed_verify(model: str, flags: PlanFlags, vflags: VerifyFlags, console: Console,
                 name: str | None = None) -> tuple[dict, bool]:
    """Verify one model, render its reconciliation and say its wall time (after the model's
    name when the check runs several): its figures (wall_s, ok, violations, verify) and
    whether a line was violated."""
    start = time.perf_counter()
    result = verify_from_flags(model, flags, vflags)
    wall_s = time.perf_counter() - start
    console.print(f"{name}: verification wall time {wall_s:,.1f} s" if name
                  else f"verification wall time: {wall_s:,.1f} s")
    render_verify(result, console)
    report = verify_to_dict(result)
    return ({"wall_s": wall_s, "ok": report["ok"], "violations": report["violations"],
             "verify": report}, bool(violations(result)))


def verify_all(runs: dict[str, tuple[str, PlanFlags, VerifyFlags]], console: Console,
               figures: dict, json_out: str | None) -> int:
    """Verify each named (model, plan flags, verify flags) in turn into figures, write them:
    1 when a line was violated in any, else 0."""
    failed = False
    for name, (model, flags, vflags) in runs.items():
        figures[name], violated = timed_verify(model, flags, vflags, console, name)
        failed = failed or violated
    write_json(json_out, figures)
    return 1 if failed else 0


def write_json(path: str | None, data: dict) -> None:
    if path:
        Path(path).write_text(json.dumps(data, indent=2, default=str))


def add_load_args(parser: argparse.ArgumentParser) -> None:
    """The declared load the multi-model checks plan: 8 requests of 2,048 tokens."""
    parser.add_argument("--context", type=int, default=2048)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--max-num-batched-tokens", type=int, default=2048)


def add_output_args(parser: argparse.ArgumentParser, dry_run_help: str) -> None:
    parser.add_argument("--json-out", default=None)
    parser.add_argument("--dry-run", action="store_true", help=dry_run_help)


def run_main(prog: str, parser: argparse.ArgumentParser,
             run: Callable[[argparse.Namespace], int]) -> None:
    """Exit with run's code; a bad input exits 2 with its one line."""
    try:
        sys.exit(run(parser.parse_args()))
    except SpecError as exc:
        print(f"{prog}: {exc.line()}", file=sys.stderr)
        sys.exit(2)
