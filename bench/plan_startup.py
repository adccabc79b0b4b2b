"""Median wall time of `servecap plan` next to importing its own dependencies, as a ratio.

    python bench/plan_startup.py [--runs 15]
"""

import argparse
import statistics
import subprocess
import sys
import time

PLAN = [sys.executable, "-m", "servecap.cli", "plan", "teaching-7b", "--json"]
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
    plan = median_seconds(PLAN, runs)
    base = median_seconds(BASELINE, runs)
    print(f"servecap plan teaching-7b --json: median {plan * 1000:.0f} ms over {runs} runs")
    print(f"import typer, rich, pydantic, yaml: median {base * 1000:.0f} ms over {runs} runs")
    print(f"ratio: {plan / base:.2f}x")


if __name__ == "__main__":
    main()
