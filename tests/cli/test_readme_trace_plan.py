"""README's verify --trace example declares enough of a plan for its trace: the KV-in-use
line holds a replay to the plan's context x concurrency, and how many of the trace's requests
overlap depends on the machine's speed (on a slow one, the example once exited 1)."""

import csv
import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _flag(args: list[str], name: str, default: int) -> int:
    return int(args[args.index(name) + 1]) if name in args else default


def test_the_readme_trace_example_plans_every_request_of_its_trace_at_once() -> None:
    line = next(ln for ln in (ROOT / "README.md").read_text().splitlines()
                if re.search(r"servecap verify .*--trace workloads/trace\.csv", ln))
    args = shlex.split(line.split("#")[0])
    context = _flag(args, "--context", 256)  # tiny-llama's declared load: 4 x 256
    concurrency = _flag(args, "--concurrency", 4)
    block = 16
    with (ROOT / "workloads" / "trace.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    blocks = [-(-(int(r["prompt_tokens"]) + int(r["output_tokens"])) // block) for r in rows]
    assert max(blocks) <= -(-context // block)
    assert concurrency >= len(rows), "declare the trace's every request: --concurrency"
    # so the trace's peak blocks never pass the plan's concurrency x ceil(context / block)
    assert sum(blocks) <= concurrency * -(-context // block)
