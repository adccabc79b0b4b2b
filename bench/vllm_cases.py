"""The published vLLM benchmark runs of tests/fixtures/vllm_bench as simulations: each run's
requests, launch flags and load as `simulate` takes them, its prediction of every figure the
source published, and the comparison (tests/fixtures/vllm_bench/SOURCE.md names the sources).

A run is simulated with `--engine vllm==<engine_pin>` (the release the source ran, so the
release's scheduling: sim/vllm_releases.py) and the launch flags it states. ShareGPT runs draw
real per-request lengths from sharegpt_v3_first_turn_lengths.csv (a resample of the dataset,
scaled to the run's published token totals where it gives them). Every request is measured,
as `vllm bench serve` does."""

import json
import math
import sys
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sharegpt_sample import FIXTURES, SHAREGPT, sharegpt_draw, sharegpt_means  # noqa: E402
from vllm_experiments import (  # noqa: E402
    BURST,
    EOS,
    SAMPLER,
    VLLM_POOL,
    burst,
    eos_stopped,
    intake_for,
    sampler_state_bytes,
)

from servecap.cli.sim_inputs import SimFlags, sim_scenario  # noqa: E402
from servecap.cli.simulate_cmd import default_policy, run_simulation  # noqa: E402
from servecap.scenario import simulation, steps  # noqa: E402
from servecap.scenario.spec import with_values  # noqa: E402
from servecap.sim.sampling import draw_requests  # noqa: E402
from servecap.sim.workload import Arrivals, Lengths, Workload  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
# Published runs from sources the fit never read (SOURCE.md there): predicted with the shipped
# terms by `bench/vllm_latency.py --held-out`; load_cases' default stays FIXTURES, so neither
# the fit nor leave-one-source-out reads them
HELD_OUT = FIXTURES.parent / "vllm_bench_heldout"
# The tokenizer (a column of the sample) each ShareGPT run's model counts tokens with
SHAREGPT_TOKENIZERS = {"llama-3": "llama3", "mixtral": "mistral"}  # else Llama-3's
# measured key -> (family, how the prediction is read from a policy entry of simulate --json)
METRICS = {
    "median_ttft_ms": ("ttft", lambda e: e["ttft_ms"]["p50"]),
    "median_tpot_ms": ("tpot", lambda e: e["tpot_ms"]["p50"]),
    "median_itl_ms": ("tpot", lambda e: e["itl_ms"]["p50"]),
    "mean_latency_ms": ("tpot", lambda e: e["e2e_ms"]["mean"]),
    "mean_e2e_ms": ("tpot", lambda e: e["e2e_ms"]["mean"]),
    "mean_ttft_ms": ("ttft", lambda e: e["ttft_ms"]["mean"]),
    "mean_tpot_ms": ("tpot", lambda e: e["tpot_ms"]["mean"]),
    "request_throughput_rps": ("throughput", lambda e: e["achieved_rps"]),
    "output_throughput_tok_s": ("throughput", lambda e: e["output_tokens_per_s"]),
    "total_token_throughput_tok_s": ("throughput",
                                     lambda e: e["output_tokens_per_s"] + e["input_tokens_per_s"]),
}
FAMILIES = ("ttft", "tpot", "throughput")
# measured key -> the simulator's own 95 % interval of that figure in a steady-state run
INTERVALS = {
    "median_ttft_ms": lambda e: e["ttft_ms_ci"]["p50"],
    "median_tpot_ms": lambda e: e["tpot_ms_ci"]["p50"],
    "median_itl_ms": lambda e: e["itl_ms_ci"]["p50"],
    "request_throughput_rps": lambda e: e["achieved_rps_ci"],
    "output_throughput_tok_s": lambda e: e["output_tokens_per_s_ci"],
}
TARGET_MEDIAN, TARGET_MAX = 0.15, 0.40


@dataclass(frozen=True)
class Case:
    """One run of one fixture file, with the group (GPU, model, TP, flags) it belongs to."""

    fixture: str
    data: dict
    group: dict
    run: dict

    @property
    def name(self) -> str:
        return f"{self.fixture}:{self.run['id']}"

    @property
    def source(self) -> str:
        """The independent source the run comes from (one publisher: vLLM's CI builds are
        one source), the unit leave-one-source-out holds out."""
        return self.data["source_id"]

    @property
    def label(self) -> str:
        g = self.group
        return (f"{g['model']['servecap']} / {g['gpu']['device']} / TP{g['tp']} / "
                f"vllm {self.data['vllm_version']} ({self.data['engine']})")

    @property
    def load(self) -> str:
        load = self.run["load"]
        count = load.get("num_prompts", load.get("batch"))
        text = {"poisson": f"{load.get('rate_rps')} req/s", "all-at-once": "all at once",
                "concurrency": f"concurrency {load.get('concurrency')}",
                "batch": f"batch {load.get('batch')}"}[load["kind"]]
        return f"{text}, {count} prompts"


def load_cases(folder: Path = FIXTURES, only: str | None = None) -> list[Case]:
    """Every run of every fixture file (the ShareGPT shape reference is not a run)."""
    cases = []
    for path in sorted(folder.glob("*.json")):
        if path.name == SHAREGPT or (only and path.stem != only):
            continue
        data = json.loads(path.read_text(encoding="utf-8"))
        for group in data["groups"]:
            cases.extend(Case(path.stem, data, group, run) for run in group["runs"])
    return cases


def sharegpt_tokenizer(case: Case) -> str:
    """The sample's column for the run's model: the tokenizer its benchmark counted with."""
    name = case.group["model"]["servecap"].lower().split("/")[-1].replace("--", "/")
    return next((col for key, col in SHAREGPT_TOKENIZERS.items() if key in name), "llama3")


def ignore_eos(case: Case) -> bool:
    """Whether the run's client generates every output to its dataset length: vLLM's offline
    benchmark_throughput.py (ignore_eos=True) and SGLang's bench_serving.py (ignore_eos
    unless --disable-ignore-eos); benchmark_serving.py stops at EOS."""
    return offline(case) or "sglang.bench_serving" in case.data.get("client", "")


def requests_for(case: Case, folder: Path = FIXTURES) -> list:
    """The run's requests: the workload's arrivals and lengths; a ShareGPT run's lengths are
    real per-request pairs drawn from the ShareGPT sample (prompt and output together, under
    its model's tokenizer)."""
    requests = draw_requests(workload_for(case, folder))
    shape = case.run["shape"]
    if shape.get("dataset") != "sharegpt":
        return requests
    if "total_input_tokens" in shape:  # the run's own totals: the sample scaled to them
        pairs = scaled_to(sharegpt_draw(len(requests), folder, ignore_eos=True),
                          shape["total_input_tokens"], shape["total_output_tokens"])
    else:
        pairs = sharegpt_draw(len(requests), folder, ignore_eos(case),
                              tokenizer=sharegpt_tokenizer(case))
    return [replace(r, prompt_tokens=p, output_tokens=o)
            for r, (p, o) in zip(requests, pairs, strict=True)]


def scaled_to(pairs: list[tuple[int, int]], total_in: int, total_out: int
              ) -> list[tuple[int, int]]:
    """The pairs with every prompt and every output scaled by one factor each, so their sums
    are the run's published totals (a run counted with another tokenizer, or a chat
    endpoint's, keeps the sample's spread at its own means)."""
    s_in = total_in / sum(p for p, _ in pairs)
    s_out = total_out / sum(o for _, o in pairs)
    return [(max(1, round(p * s_in)), max(1, round(o * s_out))) for p, o in pairs]


def workload_for(case: Case, folder: Path = FIXTURES) -> Workload:
    """The run's request shape and load as a servecap workload."""
    shape, load = case.run["shape"], case.run["load"]
    if shape.get("dataset") == "sharegpt":
        prompt, output = sharegpt_means(folder)
        prompt_len, output_len = Lengths("fixed", value=prompt), Lengths("fixed", value=output)
    elif shape.get("range_ratio"):
        prompt_len, output_len = (_spread(shape[k], shape["range_ratio"])
                                  for k in ("input_len", "output_len"))
    else:
        prompt_len = Lengths("fixed", value=shape["input_len"])
        output_len = Lengths("fixed", value=shape["output_len"])
        if EOS["stop"] and shape.get("max_output_len", 0) > shape["output_len"]:
            output_len = eos_stopped(shape["output_len"], shape["max_output_len"])
    count = load.get("num_prompts", load.get("batch"))
    arrivals = Arrivals("poisson", rate_per_s=load["rate_rps"]) if load["kind"] == "poisson" \
        else Arrivals("bursts", burst_size=count, interval_s=1.0)
    return Workload(arrivals, prompt_len, output_len, count, name=case.run["id"])


def _spread(value: int, ratio: float) -> Lengths:
    """vllm bench serve's --random-range-ratio: uniform in [value(1-r), value(1+r)]."""
    return Lengths("uniform", low=int(value * (1 - ratio)), high=int(value * (1 + ratio)))


def flags_for(case: Case) -> SimFlags:
    """simulate's flags for the run: device, TP, engine row, stated launch flags, the load."""
    g, load, flags = case.group, case.run["load"], case.group.get("flags", {})
    concurrency = load.get("concurrency")
    gmu = flags.get("gpu_memory_utilization")
    return SimFlags(device=g["gpu"]["device"], tensor_parallel_size=g["tp"],
                    weight_dtype=g["model"].get("weight_dtype"),
                    context=flags.get("max_model_len"),
                    safety=None if gmu is None else f"{(1 - gmu) * 100:g}%",
                    concurrency=concurrency, input_len=1, output_len=1, num_requests=1,
                    **engine_flags(case))


def engine_flags(case: Case) -> dict:
    """The engine the run used: its vLLM row (--engine), V0's multi-step groups and
    --enforce-eager when its launch says so, and that release's scheduler (simulate's
    default for the row: V0 prefills whole prompts first, V1 chunks them)."""
    flags = case.group.get("flags", {})
    engine = f"vllm=={case.data['engine_pin']}"
    out = {"policies": (default_policy(engine),), "engine": engine,
           "num_scheduler_steps": flags.get("num_scheduler_steps", 1),
           "enforce_eager": flags.get("enforce_eager", False),
           "async_scheduling": flags.get("async_scheduling")}
    if "max_num_seqs" in flags:
        out["max_num_seqs"] = flags["max_num_seqs"]
    return out


def offline(case: Case) -> bool:
    """benchmark_latency.py and benchmark_throughput.py: the LLM class, no HTTP server."""
    load = case.run["load"]
    return load["kind"] == "batch" or bool(load.get("offline"))


def model_for(case: Case) -> str:
    """The bundled model name, or a config directory under the repository (tests/fixtures)."""
    name = case.group["model"]["servecap"]
    return str(ROOT / name) if "/" in name else name


def predict(case: Case, folder: Path = FIXTURES, engine: bool = True,
            window: bool = False, gpu_scale: float = 1.0) -> dict:
    """simulate's policy entry for the run, every request measured (window=True: the
    steady-state window and its intervals); engine=False: the same scheduler on the device's
    roofline alone (no --engine terms). gpu_scale multiplies the device's FLOPS and bandwidth
    (the fit's per-source hardware factor, bench/vllm_fit.py; 1 everywhere else)."""
    setup = setup_for(case, folder, engine, gpu_scale)
    with intake_for(case, served=not offline(case)):
        report, _ = run_simulation(setup, window=window)
    return report["policies"][0]


def setup_for(case: Case, folder: Path = FIXTURES, engine: bool = True,
              gpu_scale: float = 1.0):
    """The run's simulate setup (predict's): the device planned, its steps priced with the
    release's terms as they stand, the run's requests. What does not depend on the engine
    terms (the model, the ledger's plan and pool, the requests) is built once per run and
    kept; the step prices are priced afresh from the plan on every call, as simulate's own
    setup prices them."""
    base, scenario, ranked = _planned(case, folder, engine)
    setup = replace(base, coefficients=steps.coefficients(ranked, scenario),
                    requests=list(base.requests))
    if offline(case):  # vLLM's offline scripts drive the engine without the API server
        setup = replace(setup, coefficients=replace(
            setup.coefficients, frontend_s=0.0, frontend_latency_s=0.0,
            frontend_prompt_token_s=0.0, frontend_output_token_s=0.0))
    extra = sampler_state_bytes(case) if engine and SAMPLER["priced"] else 0
    if extra:  # the sampler's bytes per running request, priced as a per-request state
        setup = replace(setup, coefficients=replace(
            setup.coefficients,
            state_bytes_per_request=setup.coefficients.state_bytes_per_request + extra))
    if gpu_scale != 1.0:
        c = setup.coefficients
        setup = replace(setup, coefficients=replace(
            c, flops_per_s=c.flops_per_s * gpu_scale,
            attention_flops_per_s=(c.attention_flops_per_s or c.flops_per_s) * gpu_scale,
            bandwidth_bytes_per_s=c.bandwidth_bytes_per_s * gpu_scale))
    return setup


_PLANNED: dict = {}  # (run, fixtures folder, engine) -> (its setup, scenario, ranks)


def _planned(case: Case, folder: Path, engine: bool) -> tuple:
    """The run's setup, Scenario and ranks as simulate builds them (setup_for's memory)."""
    key = (case.name, str(folder), engine, VLLM_POOL["on"])
    if key not in _PLANNED:
        flags = flags_for(case)
        if not engine:
            flags = replace(flags, engine="plain", num_scheduler_steps=1, enforce_eager=False)
        scenario = sim_scenario(model_for(case), flags)
        setup = replace(simulation.setup(scenario), requests=requests_for(case, folder))
        if engine and VLLM_POOL["on"]:
            setup = replace(setup, num_blocks=min(setup.num_blocks, vllm_blocks(case, scenario)))
        _PLANNED[key] = (setup, scenario, simulation.rank(scenario))
    return _PLANNED[key]


def vllm_blocks(case: Case, scenario) -> int:
    """The blocks `plan --engine vllm==<pin>` gives the run's binding rank: vLLM's own pool at
    the run's stated gpu_memory_utilization (else the release's default) and flags."""
    gmu = case.group.get("flags", {}).get("gpu_memory_utilization")
    planned = simulation.rank(with_values(scenario, {
        "engine.name": "vllm", "engine.version": case.data["engine_pin"], "memory.safety": None,
        "memory.gpu_memory_utilization": gmu})).plan
    return planned.budget.num_gpu_blocks


def compare(case: Case, entry: dict, windowed: dict | None = None) -> list[dict]:
    """One row per measured figure servecap predicts (a mean where the source gave no median
    of the same quantity). Under V0 multi-step scheduling a stream delivers its tokens in
    chunks of num_scheduler_steps and the client times one gap per chunk, so the ITL
    compared is that many token gaps. log_error = ln(predicted / measured), what the fit
    minimises and the prediction interval is built on."""
    rows, steps = [], case.group.get("flags", {}).get("num_scheduler_steps", 1)
    measured = case.run["measured"]
    for key, value in measured.items():
        if key not in METRICS or key.replace("mean_", "median_") in measured and \
                key.startswith("mean_") and key != "mean_latency_ms":
            continue
        family, read = METRICS[key]
        predicted = read(entry) * (steps if key == "median_itl_ms" else 1)
        rows.append({"fixture": case.name, "source": case.source, "setup": case.label,
                     "load": case.load, "metric": key, "family": family, "measured": value,
                     "spread_bound": spread_bound(case),
                     "backlog": family == "ttft" and (
                         fell_behind(case) or (BURST["out"] and burst(case))),
                     "predicted": predicted, "error": error(predicted, value),
                     "log_error": math.log(max(predicted, 1e-12) / value),
                     "interval": interval_verdict(key, value, windowed, steps)})
    return rows


def interval_verdict(key: str, measured: float, windowed: dict | None, steps: int = 1) -> str:
    """Whether the measurement lies inside the simulator's own 95 % interval of the figure
    (from the steady-state run): 'inside', 'outside', or 'none' (no steady state, or the
    figure has no interval)."""
    if windowed is None or key not in INTERVALS or not windowed.get("steady_state"):
        return "none"
    low, high = INTERVALS[key](windowed)
    if low is None or high is None:
        return "none"
    scale = steps if key == "median_itl_ms" else 1
    return "inside" if low * scale <= measured <= high * scale else "outside"


# An open loop whose server keeps up ends within a few percent of its offered rate (the
# fixtures' own: 98.5-99.2 % at 200-500 prompts); below this share the server fell behind
KEPT_UP = 0.9


def fell_behind(case: Case) -> bool:
    """An open loop whose measured request rate is under KEPT_UP x the rate it was sent at:
    vllm bench serve sends at the rate whatever the server does (vllm/benchmarks/serve.py
    get_request), so the server fell behind and requests queued for it; the run's TTFT is
    then the backlog, which grows with every prompt sent (the DeepSeek-R1 issue's 1,000
    prompts at 4/s against 2.11/s served: median 104 s). That figure measures the capacity
    shortfall, which its throughput comparisons already test, and not the per-request
    terms, so the fit does not weigh it (bench/vllm_fit.py); it is still predicted and
    reported."""
    load, measured = case.run["load"], case.run["measured"]
    return load["kind"] == "poisson" and "request_throughput_rps" in measured \
        and measured["request_throughput_rps"] < KEPT_UP * load["rate_rps"]


def spread_bound(case: Case) -> bool:
    """A ShareGPT set of at most 1,000 prompts sent at once: its duration is the longest
    request's, which a resample of the lengths does not fix (the draw's own requests are not
    published; across seeds a 200-prompt resample's throughput moves by tens of percent)."""
    load = case.run["load"]
    return case.run["shape"].get("dataset") == "sharegpt" and load["kind"] == "all-at-once" \
        and load["num_prompts"] <= 1000


def error(predicted: float, measured: float) -> float:
    """Signed relative error of the prediction, (p - m) / m."""
    return (predicted - measured) / measured


