"""The Scenario's sections that say what is asked of a deployment: the resident load a plan
checks, the traffic simulated or sent, SLOs, prices, speculation, the simulator, the search, the
envelope, and the runtime, load client and server that verify it (scenario/spec.py composes them
with the deployment's sections)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

if TYPE_CHECKING:  # scenario/file.py names them where it builds the validator
    from pydantic import Field, StrictBool

    from .spec_types import Count, Fraction, Real, Text, Zero

# each section closed to unknown keys: pydantic's ConfigDict(extra="forbid"), a TypedDict, so
# the plain dict it makes
FORBID = {"extra": "forbid"}


@dataclass(frozen=True)
class Load:
    """The resident load a plan checks: concurrency requests of max_model_len tokens, or a
    mixed batch of live lengths; shared_prefix tokens of prompt are stored once."""

    __pydantic_config__ = FORBID
    concurrency: Count | None = None
    lengths: tuple[Count, ...] | None = None
    shared_prefix: Zero = 0


@dataclass(frozen=True)
class Workload:
    """The traffic simulated or sent: a workload YAML, a CSV trace, or a fixed shape
    (input_len, output_len); rate and num_requests replace the file's (vllm bench serve's
    --request-rate, --num-prompts, --max-concurrency)."""

    __pydantic_config__ = FORBID
    file: Text | None = None
    trace: Text | None = None
    rate: Annotated[Real, Field(gt=0)] | None = None
    num_requests: Count | None = None
    input_len: Count | None = None
    output_len: Count | None = None
    max_concurrency: Count | None = None


@dataclass(frozen=True)
class Slo:
    """Latency targets ('500ms', '2s'), the share of requests that must meet them, and the
    percentiles reported ('50,90,99')."""

    __pydantic_config__ = FORBID
    ttft: Text | None = None
    tpot: Text | None = None
    e2e: Text | None = None
    target: Fraction = 0.9
    percentiles: Text | None = None


@dataclass(frozen=True)
class Prices:
    """What the hours cost: search's DEVICE=USD per GPU-hour (None: servecap's labelled price
    table), and cost's on-demand and reserved USD per GPU-hour, the share of hours in use and
    an API's USD per million output and input tokens to break even against."""

    __pydantic_config__ = FORBID
    gpu_price: tuple[Text, ...] | None = None
    usd_per_gpu_hour: Annotated[Real, Field(gt=0)] = 2.0
    reserved_usd_per_gpu_hour: Annotated[Real, Field(gt=0)] | None = None
    utilization: Fraction = 1.0
    api_usd_per_million_output: Annotated[Real, Field(gt=0)] | None = None
    api_usd_per_million_input: Annotated[Real, Field(ge=0)] | None = None


@dataclass(frozen=True)
class Speculative:
    """Speculative decoding (vLLM's --speculative-config): the draft model, the tokens it
    proposes per step, the acceptance rate assumed, and the batch size above which it stops."""

    __pydantic_config__ = FORBID
    model: Text | None = None
    num_speculative_tokens: Count = 4
    acceptance: Annotated[Real, Field(ge=0, le=1)] = 0.7
    disable_by_batch_size: Count | None = None


@dataclass(frozen=True)
class Simulator:
    """How the simulator runs the question: the scheduler policies compared, the step model
    (a coefficients file, speed of light, a fixed overhead, a spread and its seeds) and the
    fleet (replicas behind a router, or disaggregated prefill:decode pools); a sweep's offered
    rates ('1,2,4'; None: num_rates evenly up to saturation); engine: the vLLM release whose
    scheduling and host costs the simulator runs ('vllm==0.6.3'; 'plain': none, the device's
    roofline alone; None: scenario/steps.py DEFAULT_ENGINE; the pool stays the ledger's,
    which engine.name sizes by a release's budget)."""

    __pydantic_config__ = FORBID
    policies: tuple[Text, ...] = ("continuous",)
    step_overhead: Text = "0ms"
    coefficients: Text | None = None
    speed_of_light: StrictBool = False
    step_time_cv: Annotated[Real, Field(ge=0, lt=10)] | None = None
    seed: Zero = 0
    seeds: Count = 1
    replicas: Count = 1
    router: Text = "least-tokens"
    disaggregate: Text | None = None
    kv_transfer: Text = "50GB/s"
    engine: Text | None = None
    rates: Text | None = None
    num_rates: Count = 10


@dataclass(frozen=True)
class Search:
    """The space `servecap search` tries, each axis as a comma-separated list (devices by
    catalog name or unique prefix; None: every replica count --max-gpus allows, the
    checkpoint's dtypes), and whether it prunes by monotonicity and bisects capacities."""

    __pydantic_config__ = FORBID
    devices: Text | None = None
    tensor_parallel_sizes: Text = "1,2,4,8"
    pipeline_parallel_sizes: Text = "1"
    replicas: Text | None = None
    weight_dtypes: Text | None = None
    kv_dtypes: Text | None = None
    max_num_seqs: Text = "128,256"
    max_num_batched_tokens: Text = "2048,8192"
    disaggregate: Text = "1:1,1:2,2:1"
    max_gpus: Count = 8
    policy: Text = "chunked-prefill"
    prune: StrictBool = True
    capacity: StrictBool = True


@dataclass(frozen=True)
class Envelope:
    """The axes `servecap workbook`'s Envelope sheet sweeps (None: the plan's device, the
    standard context ladder with the plan's context, the plan's KV dtype beside bf16 and fp8);
    its Ledger is planned at device.name, scheduler.max_model_len and dtypes.kv_cache_dtype."""

    __pydantic_config__ = FORBID
    devices: tuple[Text, ...] | None = None
    contexts: tuple[Count, ...] | None = None
    kv_dtypes: tuple[Text, ...] | None = None


@dataclass(frozen=True)
class Runtime:
    """How `servecap verify` runs the question on a device: where (cpu, cuda, cuda:N), a copy
    with only the first num_layers, each declared request's output tokens, the seed of weights
    and prompts, a local safetensors folder (None: seeded random weights), arrivals in real
    time (None: with a workload or trace), admission (reserve or optimistic) and the ceiling
    probe."""

    __pydantic_config__ = FORBID
    run_on: Text = "cpu"
    num_layers: Count | None = None
    output_tokens: Count = 16
    seed: Zero = 0
    weights: Text | None = None
    realtime: StrictBool | None = None
    admission: Text = "reserve"
    probe: StrictBool = True


@dataclass(frozen=True)
class Client:
    """How `servecap load` sends the workload to a server: the endpoint (completions or
    chat), a dataset of conversations sent as text instead of made-up prompts, turns per
    conversation and the pause between them, the output length of a dataset turn that gives
    none, the vocabulary prompt token ids are drawn from and their seed (and a dataset's
    --rate arrivals'), a request's timeout, the time after which no request starts, and the
    SLO capacity sweep (doubling rates, then bisected to sweep_tolerance of the capacity).
    The server's URL is not here: the same scenario is sent to whichever server is named."""

    __pydantic_config__ = FORBID
    endpoint: Text = "completions"
    dataset: Text | None = None
    turns: Count | None = None
    think_time: Text = "0s"
    output_tokens: Count | None = None
    vocab_size: Count = 256
    seed: Zero = 0
    timeout: Text = "600s"
    duration: Text | None = None
    sweep: StrictBool = False
    sweep_tolerance: Annotated[Real, Field(gt=0, lt=1)] = 0.1  # real runs are noisy and
    # each costs seconds: bisect to 10 %


@dataclass(frozen=True)
class Server:
    """The OpenAI-compatible server `servecap serve` runs and `servecap load` talks to: the
    `model` clients send (None: serve names it MODEL as given; load asks /v1/models), the
    server's tokenizer (a tokenizer.json, its folder or, for load, a Hub id in the local
    cache), the waiting requests beyond which it answers 429, and its edge limits (None: the
    server's defaults, runtime/server/limits.py). Where it listens (host, port) and its API
    key are not here: a run's address, and a secret a file must not hold."""

    __pydantic_config__ = FORBID
    served_model_name: Text | None = None
    tokenizer: Text | None = None
    max_waiting: Zero = 1024
    max_request_bytes: Count | None = None
    header_timeout: Annotated[Real, Field(gt=0)] | None = None
    body_timeout: Annotated[Real, Field(gt=0)] | None = None
    shutdown_timeout: Annotated[Real, Field(ge=0)] | None = None
