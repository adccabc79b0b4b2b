"""What verify reports as it goes: each phase's progress, for a bar on the user's terminal."""

from collections.abc import Callable

from .sequence import FINISHED

# progress(phase, done, total) as a phase moves: weights, kv_pool and warmup (0 then 1 of 1),
# declared_load and ceiling_probe (requests finished of the requests sent)
Progress = Callable[[str, int, int], None]


def finished_counter(engine, key: str, total: int, progress: Progress):
    """A step hook for `engine`: progress(key, requests finished, total) when the count moves."""
    progress(key, 0, total)
    done = 0

    def hook(_stats) -> None:
        nonlocal done
        now = sum(1 for r in engine.records if r.status == FINISHED)
        if now != done:
            done = now
            progress(key, done, total)

    return hook
