"""Median wall and CPU time of `servecap plan` and `servecap --help` next to importing their own
dependencies (typer, rich, pydantic, yaml), as ratios. Target: both under 1.6x.

    python bench/plan_startup.py [--runs 15] [--floor]

CPU time (user + system of the child) is the figure to compare on a shared machine; wall time
is printed beside it. The children write bytecode to a temporary cache even where
PYTHONDONTWRITEBYTECODE is set, as an installed package has its .pyc files: otherwise every run
compiles servecap's modules from source. --floor adds what typer itself costs a command with
options: typer >= 0.22 builds a pydantic TypeAdapter per option, loading pydantic's machinery
that a bare `import pydantic` (lazy) does not.
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

PLAN = [sys.executable, "-m", "servecap.cli", "plan", "teaching-7b", "--json"]
HELP = [sys.executable, "-m", "servecap.cli", "--help"]
BASELINE = [sys.executable, "-c", "import typer, rich, pydantic, yaml"]
FLOOR = [sys.executable, "-c", "import typer, rich, pydantic, yaml, typer.main, typer._adapters;"
         " from pydantic import TypeAdapter; TypeAdapter(int)"]


def measure(cmd: list[str], env: dict) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def medians(runs: list[tuple[float, float]]) -> tuple[float, float]:
    return (statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--floor", action="store_true", help="also time typer's own floor")
    args = parser.parse_args()
    cache = tempfile.mkdtemp(prefix="servecap-pyc-")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = cache
    cases = {"import typer, rich, pydantic, yaml": BASELINE,
             "servecap plan teaching-7b --json": PLAN, "servecap --help": HELP}
    if args.floor:
        cases["typer floor (one TypeAdapter)"] = FLOOR
    for cmd in cases.values():  # warm the file cache and write the bytecode
        measure(cmd, env)
    samples = {label: [] for label in cases}
    for _ in range(args.runs):  # interleaved: load drifts reach every command alike
        for label, cmd in cases.items():
            samples[label].append(measure(cmd, env))
    base_wall, base_cpu = medians(samples[next(iter(cases))])  # the first case: the baseline
    for label, runs in samples.items():
        wall, cpu = medians(runs)
        print(f"{label}: median wall {wall * 1000:.0f} ms ({wall / base_wall:.2f}x), CPU "
              f"{cpu * 1000:.0f} ms ({cpu / base_cpu:.2f}x) over {args.runs} runs")


if __name__ == "__main__":
    main()
