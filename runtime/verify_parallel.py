"""verify with tensor parallelism: one process per rank (gloo on the CPU, NCCL on CUDA), each
holding its shard of weights and KV heads and reconciling its own ledger; the binding rank is
the one with the least headroom left at its peak.

A rank that fails (out of memory, a request that never finished, an error) writes its finding
and exits at once; torch.multiprocessing's join then stops every other rank, including those
waiting in a collective for it, so a failure ends the run within seconds, as one violation.
"""

import logging
import os
import pickle
import tempfile
import time
from dataclasses import replace
from datetime import timedelta
from multiprocessing import connection as mp_connection
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from servecap.ledger.errors import SpecError
from servecap.ledger.model import ModelSpec
from servecap.ledger.serve import ServeSpec
from servecap.ledger.verification import Failure

from .parallel import TensorParallel, check_split
from .progress import Progress
from .verify import verify
from .verify_result import (
    ParallelResult,
    RankFailure,
    VerifyOptions,
    VerifyResult,
    binding_rank,
)

# how gloo and NCCL say the other end of a collective went away (a consequence, not a cause)
PEER_SIGNS = ("Connection closed by peer", "Connection reset by peer", "Read error",
              "Broken pipe", "NCCL communicator was aborted")
PEER_STOPPED = "peer_stopped"  # a rank whose collective broke because another rank left
COLLECTIVE_TIMEOUT = timedelta(minutes=10)  # last resort; a failing rank stops the others first


def verify_parallel(spec: ModelSpec, serve: ServeSpec, options: VerifyOptions,
                    size: int, progress: Progress | None = None) -> ParallelResult:
    """Spawn `size` ranks, each running verify() on its shard; rank r uses cuda:r on CUDA.
    progress hears rank 0's phases (through a file the rank rewrites, read while joining)."""
    check_split(spec, TensorParallel(0, size))
    if options.device != "cpu" and torch.cuda.device_count() < size:
        raise SpecError("--tensor-parallel-size", size, f"needs {size} CUDA devices, "
                        f"{torch.cuda.device_count()} visible")
    # torch logs a warning as it stops the other ranks: that is the designed path, not news
    logging.getLogger("torch.multiprocessing.spawn").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory() as tmp:
        context = mp.spawn(_rank_main, args=(size, spec, serve, options, tmp), nprocs=size,
                           join=False)
        relay = _relay(Path(tmp) / PROGRESS_FILE, progress) if progress else None
        failed = _join(context.processes, relay)
        if failed is not None and not _all_measured(Path(tmp), size):
            return replace(_failed(Path(tmp), size, failed), spec=spec, serve=serve)
        results = [_collect(Path(tmp) / f"rank{r}.pkl") for r in range(size)]
    return ParallelResult(tuple(results), binding_rank(results))


def _join(processes, relay=None, grace_s: float = 10.0) -> str | None:
    """Wait for every rank (calling relay() as it waits). When one fails, the others get
    `grace_s` to write their own finding and leave (a rank that failed first may be the one
    that saw a peer go, not the cause) before they are stopped; returns how the first failing
    rank ended, or None."""
    first = None
    deadline = None
    while any(p.is_alive() for p in processes):
        alive = [p for p in processes if p.is_alive()]
        mp_connection.wait([p.sentinel for p in alive], timeout=0.2)
        if relay is not None:
            relay()
        for rank, p in enumerate(processes):
            if first is None and not p.is_alive() and p.exitcode != 0:
                first = f"process {rank} terminated with exit code {p.exitcode}"
                deadline = time.monotonic() + grace_s
        if deadline is not None and time.monotonic() > deadline:
            for p in processes:
                if p.is_alive():
                    p.terminate()
            break
    for p in processes:
        p.join()
    if first is None:
        bad = [(r, p.exitcode) for r, p in enumerate(processes) if p.exitcode != 0]
        first = f"process {bad[0][0]} terminated with exit code {bad[0][1]}" if bad else None
    return first


def _rank_main(rank: int, size: int, spec: ModelSpec, serve: ServeSpec,
               options: VerifyOptions, tmp: str) -> None:
    cpu = options.device == "cpu"
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // size))
    if not cpu:
        torch.cuda.set_device(rank)  # before NCCL starts: each rank's communicator on its GPU
    dist.init_process_group("gloo" if cpu else "nccl", init_method=f"file://{tmp}/init",
                            rank=rank, world_size=size, timeout=COLLECTIVE_TIMEOUT)
    device = "cpu" if cpu else f"cuda:{rank}"
    progress = _to_file(Path(tmp) / PROGRESS_FILE) if rank == 0 else None
    try:
        outcome = verify(spec, serve, replace(options, device=device), TensorParallel(rank, size),
                         progress)
    except SpecError as exc:  # bad input found on a rank: the others may be mid-collective
        _write(tmp, rank, ("error", exc.field, exc.value, exc.allowed, exc.source))
        os._exit(2)
    except RankFailure as exc:
        _write(tmp, rank, ("failed", exc.failure))
        os._exit(1)  # peers may wait in a collective for this rank: end it now
    except Exception as exc:  # noqa: BLE001 - any other error on a rank is that rank failing
        _write(tmp, rank, ("failed", _rank_error(rank, exc)))
        os._exit(1)
    _write(tmp, rank, outcome)  # the measurement, before a teardown can lose it
    try:
        dist.barrier()  # every rank done before any tears its connections down
        dist.destroy_process_group()
    except Exception:  # noqa: BLE001 - a peer that failed after this rank finished: the
        os._exit(1)  # peer's own file says why


PROGRESS_FILE = "progress"


def _to_file(path: Path) -> Progress:
    """Rank 0's progress as one line 'phase done total', replaced whole each time it moves."""
    def write(phase: str, done: int, total: int) -> None:
        path.with_suffix(".tmp").write_text(f"{phase} {done} {total}")
        os.replace(path.with_suffix(".tmp"), path)

    return write


def _relay(path: Path, progress: Progress):
    """Read the progress file and pass on what changed since the last read."""
    last = None

    def relay() -> None:
        nonlocal last
        try:
            text = path.read_text()
        except OSError:
            return
        if text != last and len(parts := text.split()) == 3:
            last = text
            progress(parts[0], int(parts[1]), int(parts[2]))

    return relay


def _rank_error(rank: int, exc: Exception) -> Failure:
    """A collective that broke because a peer left is a consequence, not a cause."""
    text = str(exc).splitlines()[0] if str(exc) else ""
    if isinstance(exc, dist.DistError) or any(sign in text for sign in PEER_SIGNS):
        return Failure(PEER_STOPPED, f"rank {rank} stopped", f"rank {rank}: a peer left: {text}")
    return Failure("rank_failed", f"rank {rank} failed",
                   f"rank {rank}: {type(exc).__name__}: {text}")


def _write(tmp: str, rank: int, outcome) -> None:
    path = Path(tmp) / f"rank{rank}.pkl"
    with open(path.with_suffix(".tmp"), "wb") as out:
        pickle.dump(outcome, out)
    os.replace(path.with_suffix(".tmp"), path)


def _failed(tmp: Path, size: int, exc: str) -> ParallelResult:
    """The ranks' own findings; a rank that left none is named with how it ended."""
    failures = []
    for rank in range(size):
        path = tmp / f"rank{rank}.pkl"
        outcome = pickle.loads(path.read_bytes()) if path.exists() else None
        if isinstance(outcome, tuple) and outcome[0] == "failed":
            failures.append(outcome[1])
        elif isinstance(outcome, tuple) and outcome[0] == "error":
            raise SpecError(*outcome[1:])
    causes = [f for f in failures if f.name != PEER_STOPPED]
    failures = causes or failures
    if not failures:
        failures.append(Failure("rank_failed", "a rank failed", str(exc).splitlines()[0]))
    return ParallelResult((), 0, tuple(failures), size)


def _all_measured(tmp: Path, size: int) -> bool:
    """Every rank wrote its measurement: a rank that then dies in gloo's or NCCL's teardown
    (gloo can abort with 'terminate called without an active exception' on a loaded host)
    changes nothing that was measured."""
    for rank in range(size):
        path = tmp / f"rank{rank}.pkl"
        if not path.exists() or isinstance(pickle.loads(path.read_bytes()), tuple):
            return False
    return True


def _collect(path: Path) -> VerifyResult:
    with open(path, "rb") as handle:
        outcome = pickle.load(handle)
    if isinstance(outcome, tuple) and outcome[0] == "error":
        raise SpecError(*outcome[1:])
    return outcome
