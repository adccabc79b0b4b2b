"""The latency experiments bench/vllm_latency.py measures and simulate does not adopt, each
off by default and switched on by its flag (docs/vllm-latency.md has their figures):
--eos-stop (EOS), --microbatch-intake (MICROBATCH), --price-sampler (SAMPLER), --vllm-pool
(VLLM_POOL, read by bench/vllm_cases.py's setup), --burst-ttft-unweighted (BURST, read by
bench/vllm_cases.py's compare). A case is bench/vllm_cases.py's Case."""

import json
from contextlib import contextmanager
from pathlib import Path

from servecap.ledger.sampler import (
    defaults_apply,
    filter_path,
    has_penalties,
    sampler_bytes_per_request,
    samples,
)
from servecap.ledger.vllm_versions import row as vllm_row
from servecap.sim.core import INTAKE
from servecap.sim.workload import Lengths

ROOT = Path(__file__).resolve().parents[1]


# --eos-stop (bench/vllm_latency.py): an experiment, off by default (docs/vllm-latency.md)
EOS = {"stop": False}


def eos_stopped(mean: float, cap: int) -> Lengths:
    """The output lengths of a random-dataset run whose client did not pass --ignore-eos:
    vllm bench serve asks for max_tokens = --random-output-len (`cap`), ignore_eos only when
    told (vllm/benchmarks/lib/endpoint_request_func.py at v0.13.0), and the engine ends a
    request at its model's EOS or there (vllm/v1/core/sched/utils.py check_stop at v0.13.0:
    FINISHED_STOPPED on eos_token_id unless ignore_eos, else LENGTH_CAPPED), so the published mean
    output (`mean`) under the cap says some stopped early. Where each stopped is not
    published; assumed: a constant chance p of EOS at every token (the least assumption, no
    preferred length), so L = min(geometric(p), cap), p chosen so that E[L] = mean."""
    lo, hi = 0.0, 1.0
    for _ in range(60):  # E[L] = (1 - (1 - p)^cap) / p falls as p rises
        p = (lo + hi) / 2
        lo, hi = (lo, p) if (1 - (1 - p) ** cap) / p < mean else (p, hi)
    p = (lo + hi) / 2
    weights = [p * (1 - p) ** (k - 1) for k in range(1, cap)] + [(1 - p) ** (cap - 1)]
    return Lengths("empirical", values=tuple(range(1, cap + 1)), weights=tuple(weights))


# --burst-ttft-unweighted (bench/vllm_latency.py): an experiment, off by default
# (docs/vllm-latency.md). A burst's TTFT weighs 0 in the fit, as a backlog's does
BURST = {"out": False}


def burst(case) -> bool:
    """Every prompt sent at once (more than one, no --max-concurrency): the run's TTFT is
    then the queue the burst itself forms, the time the server takes to reach the median
    prompt, which measures its capacity (the run's throughput and TPOT comparisons test
    that) rather than what one request costs on the way in; fitted on, it pulls the
    per-request terms (the API server's serial time, V1's latency outside its queue) that
    light loads identify."""
    load = case.run["load"]
    return load["kind"] == "all-at-once" and load.get("num_prompts", 0) > 1 \
        and not load.get("concurrency")


# --microbatch-intake (bench/vllm_latency.py): an experiment, off by default
# (docs/vllm-latency.md). From v0.10.1 vLLM's API server tokenizes prompts in micro-batches
# (AsyncMicrobatchTokenizer: max_batch_size 32, batch_wait_timeout_s 0.002, one thread;
# vllm/utils/__init__.py at v0.10.1, vllm/utils/async_utils.py at v0.19.0, called from
# vllm/entrypoints/renderer.py at v0.11.0 and vllm/renderers/base.py at v0.23.0), so requests
# that reach it together go on to the engine together (sim/engine.py INTAKE, as sim/core.py
# picks it: the compiled engine's or the interpreted one's)
MICROBATCH = {"on": False}
MICROBATCH_FROM = (0, 10, 1)
MICROBATCH_INTAKE = {"batch": 32, "window_s": 0.002}  # max_batch_size, batch_wait_timeout_s


@contextmanager
def intake_for(case, served: bool):
    """sim/engine.py's INTAKE set to the run's API server inside the block: the micro-batch
    where MICROBATCH is on and the run goes through (`served`) a V1 API server from
    MICROBATCH_FROM; one request at a time otherwise (restored after)."""
    version = tuple(int(x) for x in case.data["engine_pin"].split("."))
    saved = dict(INTAKE)
    if MICROBATCH["on"] and case.data["engine"] == "v1" and served \
            and version >= MICROBATCH_FROM:
        INTAKE.update(MICROBATCH_INTAKE)
    try:
        yield
    finally:
        INTAKE.update(saved)


# --price-sampler (bench/vllm_latency.py): an experiment measured and not adopted
# (docs/vllm-latency.md); simulate does not price the sampler, so off by default
SAMPLER = {"priced": False}


def sampler_state_bytes(case) -> int:
    """Half the bytes the sampler moves per running request per step (the step model reads
    and writes a request's state once: 2 x state bytes), 0 where requests decode greedily: a
    client that sends a temperature (`client_temperature` in the fixture, absent: 0, as vLLM's
    benchmark clients before 0.15 send), a release before generation_config defaults, or a
    model (`generation_config` of the group) whose defaults do not sample."""
    gc_path = case.group.get("generation_config")
    if not gc_path or case.data.get("client_temperature", 0.0) is not None:
        return 0
    version = tuple(int(x) for x in case.data["vllm_version"].split(".")[:3])
    gc = json.loads((ROOT / gc_path).read_text())
    if not defaults_apply(version, False) or not samples(gc):
        return 0
    vocab = json.loads((ROOT / gc_path).with_name("config.json").read_text())["vocab_size"]
    path = filter_path(vllm_row(case.data["vllm_version"]), int(gc.get("top_k", 0)),
                       float(gc.get("top_p", 1.0)))
    return (sampler_bytes_per_request(vocab, path, has_penalties(gc)) + 1) // 2


# --vllm-pool (bench/vllm_latency.py): an experiment, off by default (docs/vllm-latency.md).
# simulate's pool is the plain ledger's (device - weights - runtime peak - safety, the run's
# gpu_memory_utilization read as a safety of 1 - it), while vLLM sizes its own from its
# profile (`plan --engine vllm==<release>`: gpu_memory_utilization of the device less the
# profile's peak, non-torch memory and graphs). On, a run schedules in the blocks that plan
# gives at the run's release, flags and stated fraction (at most the ledger's).
VLLM_POOL = {"on": False}
