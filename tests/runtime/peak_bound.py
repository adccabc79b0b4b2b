"""The runtime-peak bound checked against the CPU allocator: the measured peak of the profile
step (the widest prefill chunk and the widest decode) <= the bound <= TOLERANCE x measured, and
the plan's default estimate (blind to the KV dtype) at least the bound at the default block."""

import torch

from servecap.ledger.model import ModelSpec
from servecap.ledger.runtime_estimate import estimate_runtime_peak, runtime_peak_bound
from servecap.ledger.serve import ServeSpec
from servecap.ledger.units import GiB
from servecap.runtime.engine import Engine, EngineConfig
from servecap.runtime.kv_pool import KVPool
from servecap.runtime.model import DEFAULT_OPTIONS, DecoderOptions
from servecap.runtime.state_pool import StatePool
from servecap.runtime.telemetry import AllocatorCounter
from servecap.runtime.weights import random_decoder

TOLERANCE = 1.25


def check_bound(spec: ModelSpec, dtype: str, kv_dtype: str, tokens: int, seqs: int, block: int,
                opts: DecoderOptions = DEFAULT_OPTIONS) -> None:
    torch.set_num_threads(1)
    serve = ServeSpec(device_bytes=GiB, context_tokens=256, concurrency=1, weight_dtype=dtype,
                      kv_dtype=kv_dtype, activation_dtype=dtype, block_size_tokens=block,
                      max_num_batched_tokens=tokens, max_num_seqs=seqs)
    model = random_decoder(spec, dtype, opts=opts)
    pool = KVPool(spec, 4, block, kv_dtype)
    states = StatePool(spec, 2) if spec.state_layers else None
    engine = Engine(model, pool, EngineConfig(max_num_seqs=seqs, max_num_batched_tokens=tokens),
                    states)
    engine.profile_run()  # first call: lazily made kernel state
    counter = AllocatorCounter()
    with counter:
        engine.profile_run()
    bound, _ = runtime_peak_bound(spec, serve)
    assert counter.peak_bytes <= bound <= TOLERANCE * counter.peak_bytes, \
        (counter.peak_bytes, bound)
    if block <= 16:  # the plan's default, blind to the KV dtype, bounds it too
        assert estimate_runtime_peak(spec, serve)[0] >= bound
