"""Median wall time of `servecap plan` and `servecap --help` next to importing their own
dependencies (typer, rich, pydantic, yaml), as ratios. Target: both under 1.6x.

    python bench/plan_startup.py [--runs 15]
"""

import argparse
import statistics
import subprocess
import sys
import time

PLAN = [sys.executable, "-m", "servecap.cli", "plan", "teaching-7b", "--json"]
HELP = [sys.executable, "-m", "servecap.cli", "--help"]
BASELINE = [sys.executable, "-c", "import typer, rich, pydantic, yaml"]


def median_seconds(cmd: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=15)
    runs = parser.parse_args().runs
    median_seconds(PLAN, 2)  # warm the file cache and bytecode
    median_seconds(HELP, 1)
    base = median_seconds(BASELINE, runs)
    print(f"import typer, rich, pydantic, yaml: median {base * 1000:.0f} ms over {runs} runs")
    for label, cmd in (("servecap plan teaching-7b --json", PLAN), ("servecap --help", HELP)):
        took = median_seconds(cmd, runs)
        print(f"{label}: median {took * 1000:.0f} ms over {runs} runs, ratio {took / base:.2f}x")


if __name__ == "__main__":
    main()
