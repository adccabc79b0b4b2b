"""verify's phases on the terminal: a rich progress bar each (weights, KV pool, warm-up, the
declared load, the ceiling probe) on stderr; nothing when stdout is not a terminal or --json."""

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

LABELS = {"weights": "loading the weights", "kv_pool": "allocating the KV pool",
          "warmup": "warm-up", "declared_load": "declared load (requests)",
          "ceiling_probe": "ceiling probe (requests)"}


def wanted(as_json: bool) -> bool:
    """Bars only for a person watching: stdout a terminal and no --json."""
    return not as_json and sys.stdout.isatty()


@contextmanager
def phase_bars(enabled: bool) -> Iterator[Callable[[str, int, int], None] | None]:
    """Yields progress(phase, done, total) for the runtime, or None when disabled. A phase
    that starts completes the ones before it (under tensor parallelism rank 0's reports are
    read every 0.2 s, so a short phase's last report may be missed)."""
    console = Console(file=sys.stderr)
    if not enabled or not console.is_terminal:
        yield None
        return
    with Progress(TextColumn("{task.description:<26}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console) as bar:
        tasks: dict[str, int] = {}

        def progress(phase: str, done: int, total: int) -> None:
            if phase not in tasks:
                for task in tasks.values():
                    bar.update(task, completed=bar.tasks[task].total)
                    bar.stop_task(task)
                tasks[phase] = bar.add_task(LABELS.get(phase, phase), total=total)
            bar.update(tasks[phase], completed=done, total=total)

        yield progress
