"""One gloo rank's run of the MoE checkpoints (tests/runtime/test_moe_tensor_parallel.py): its
own module, so the spawned ranks import torch and servecap only, not transformers."""

import json
import os
from datetime import timedelta

import torch
import torch.distributed as dist

from servecap.model_configs import load_model
from servecap.runtime.engine import Engine, EngineConfig
from servecap.runtime.kv_pool import KVPool
from servecap.runtime.parallel import TensorParallel
from servecap.runtime.sequence import Arrival
from servecap.runtime.weights import load_decoder

WORKLOAD = [Arrival(0.0, 5 + 7 * i, 6, seed=i) for i in range(4)]


def generate(directory: str, tp: TensorParallel) -> dict:
    spec = load_model(directory).spec
    model = load_decoder(spec, directory, "fp32", tp=tp)
    pool = KVPool(spec, 64, 4, "fp32", tensor_parallel_size=tp.size)
    engine = Engine(model, pool, EngineConfig(max_num_batched_tokens=9))
    return {"tokens": [r.output_token_ids for r in engine.run(WORKLOAD)],
            "weights": model.weight_bytes}


def rank(index: int, size: int, init_file: str, out_file: str, directories: list[str]) -> None:
    """One rank's tokens and weight bytes per checkpoint; the process group is destroyed on
    every path (see test_tensor_parallel.py)."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=index,
                            world_size=size, timeout=timedelta(seconds=120))
    try:
        results = {d: generate(d, TensorParallel(index, size)) for d in directories}
        with open(f"{out_file}.{index}.part", "w") as f:
            json.dump(results, f)
        os.replace(f"{out_file}.{index}.part", f"{out_file}.{index}")
        dist.barrier()
    finally:
        dist.destroy_process_group()
