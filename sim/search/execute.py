"""Run batches in order-independent parallel: inline, a local process pool, or Ray."""

import contextlib
import multiprocessing
import signal
import threading
from collections.abc import Callable

from servecap.ledger.errors import SpecError

from .batch import Batch, run_batch
from .problem import Problem


def run_all(problem: Problem, batches: list[Batch], workers: int = 1, ray: str | None = None,
            prune: bool = True, on_done: Callable[[], None] | None = None
            ) -> tuple[dict[int, dict], bool]:
    """Results keyed by batch index (so order never depends on who finished first), and
    whether a Ctrl-C stopped the run early (the keys then say what finished)."""
    return map_tasks(run_batch, [(problem, batch, prune) for batch in batches], workers, ray,
                     on_done)


@contextlib.contextmanager
def sigterm_as_sigint():
    """SIGTERM (a scheduler, `timeout`, `kill`) stops the run as Ctrl-C does: the pool is
    terminated, what finished is kept and printed, the exit is 130; without this the parent
    died at once and each worker wrote a BrokenPipeError traceback into a closed pipe."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(_signum, _frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        with _pool_threads_held():
            yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _pool_threads_held():
    """A signal to the whole process group kills the workers and the forkserver at once, and
    the pool's own handler thread can fail respawning a worker through the dead forkserver
    (EOFError) before the parent's handler has run. Such a failure in the pool's threads is
    held: dropped when the run was interrupted, shown as Python would show it otherwise."""
    held = []
    previous = threading.excepthook

    def hold(args) -> None:
        if args.thread is not None and "(_handle_" in args.thread.name:
            held.append(args)
        else:
            previous(args)

    threading.excepthook = hold
    try:
        yield
    except KeyboardInterrupt:
        held.clear()
        raise
    finally:
        threading.excepthook = previous
        for args in held:
            previous(args)


def _quiet_worker() -> None:
    """Workers leave Ctrl-C to the parent, which stops handing out batches; SIGTERM (the
    parent's terminate(), or a signal to the whole group) ends a worker silently at the next
    Python instruction, leaving the `with` blocks it is in: killed inside a queue's put or get
    by the default action, a worker kept the queue's lock, and the parent's terminate() then
    waited on it for ever."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _leave)


def _leave(signum, _frame):
    raise SystemExit(128 + signum)


def _context():
    """forkserver where there is one: forking the caller itself would copy its progress-bar
    thread's locks into the workers."""
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


def _ray_started(address: str, workers: int):
    """Ray, started: address 'local' starts a private Ray on this machine with `workers`
    CPUs; anything else ('auto', 'ray://host:10001') joins an existing cluster."""
    try:
        import ray
    except ImportError:
        raise SpecError("--ray", address, "needs Ray: pip install 'servecap[ray]'") from None
    if address == "local":
        ray.init(num_cpus=max(workers, 1), include_dashboard=False, log_to_driver=False)
    else:
        try:
            ray.init(address=address, log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise SpecError("--ray", address, f"no Ray cluster there ({exc}); 'auto' joins "
                            "the local node's cluster, 'local' starts a private one") from None
    return ray


def map_tasks(fn: Callable, items: list, workers: int = 1, ray: str | None = None,
              on_done: Callable[[], None] | None = None) -> tuple[dict[int, object], bool]:
    """fn(*item) for each item, inline, on a local process pool or on Ray (fn must be a
    module-level function), keyed by the item's index, and whether a Ctrl-C stopped it
    early."""
    done: dict[int, object] = {}
    tick = on_done or (lambda: None)
    jobs = [(fn, item) for item in items]
    try:
        with sigterm_as_sigint():
            if ray is not None:
                _on_ray(jobs, ray, workers, done, tick)
            elif workers <= 1:
                for i, job in enumerate(jobs):
                    done[i] = _apply(job)
                    tick()
            else:
                _on_pool(jobs, workers, done, tick)
    except KeyboardInterrupt:
        return done, True
    return done, False


def _on_pool(jobs, workers, done, tick) -> None:
    """Jobs handed out one at a time as workers free up; on Ctrl-C the workers are
    terminated at once (what they were running is lost, what finished is kept)."""
    pool = _context().Pool(workers, initializer=_quiet_worker)
    try:
        for i, result in pool.imap_unordered(_indexed_apply, list(enumerate(jobs)),
                                             chunksize=1):
            done[i] = result
            tick()
        pool.close()
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()


def _apply(job: tuple):
    fn, item = job
    return fn(*item)


def _indexed_apply(indexed: tuple) -> tuple[int, object]:
    index, job = indexed
    return index, _apply(job)


def _on_ray(jobs, address, workers, done, tick) -> None:
    """One Ray task per job. address 'local' starts a private Ray on this machine with
    `workers` CPUs; anything else ('auto', 'ray://host:10001') joins an existing cluster."""
    ray = _ray_started(address, workers)
    try:
        task = ray.remote(_apply)
        refs = {task.remote(job): i for i, job in enumerate(jobs)}
        while refs:
            ready, _ = ray.wait(list(refs), num_returns=1)
            done[refs.pop(ready[0])] = ray.get(ready[0])
            tick()
    finally:
        ray.shutdown()
