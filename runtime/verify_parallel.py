"""verify with tensor parallelism: one process per rank (gloo on the CPU, NCCL on CUDA), each
holding its shard of weights and KV heads and reconciling its own ledger; the binding rank is
the one with the least headroom left at its peak."""

import os
import pickle
import tempfile
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from servecap.ledger.errors import SpecError
from servecap.ledger.model import ModelSpec
from servecap.ledger.serve import ServeSpec

from .parallel import TensorParallel, check_split
from .verify import ParallelResult, VerifyOptions, VerifyResult, binding_rank, verify

COLLECTIVE_TIMEOUT = timedelta(minutes=10)  # a rank that dies must not hang the others forever


def verify_parallel(spec: ModelSpec, serve: ServeSpec, options: VerifyOptions,
                    size: int) -> ParallelResult:
    """Spawn `size` ranks, each running verify() on its shard; rank r uses cuda:r on CUDA."""
    check_split(spec, TensorParallel(0, size))
    if options.device != "cpu" and torch.cuda.device_count() < size:
        raise SpecError("--tensor-parallel-size", size, f"needs {size} CUDA devices, "
                        f"{torch.cuda.device_count()} visible")
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(_rank_main, args=(size, spec, serve, options, tmp), nprocs=size, join=True)
        results = [_collect(Path(tmp) / f"rank{r}.pkl") for r in range(size)]
    return ParallelResult(tuple(results), binding_rank(results))


def _rank_main(rank: int, size: int, spec: ModelSpec, serve: ServeSpec,
               options: VerifyOptions, tmp: str) -> None:
    cpu = options.device == "cpu"
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // size))
    if not cpu:
        torch.cuda.set_device(rank)  # before NCCL starts: each rank's communicator on its GPU
    dist.init_process_group("gloo" if cpu else "nccl", init_method=f"file://{tmp}/init",
                            rank=rank, world_size=size, timeout=COLLECTIVE_TIMEOUT)
    try:
        device = "cpu" if cpu else f"cuda:{rank}"
        outcome = verify(spec, serve, replace(options, device=device), TensorParallel(rank, size))
    except SpecError as exc:
        outcome = ("error", exc.field, exc.value, exc.allowed, exc.source)
    finally:
        dist.destroy_process_group()
    with open(Path(tmp) / f"rank{rank}.pkl", "wb") as out:
        pickle.dump(outcome, out)


def _collect(path: Path) -> VerifyResult:
    with open(path, "rb") as handle:
        outcome = pickle.load(handle)
    if isinstance(outcome, tuple) and outcome[0] == "error":
        raise SpecError(*outcome[1:])
    return outcome
