"""Run every published vLLM benchmark run in tests/fixtures/vllm_bench through `simulate` and
compare what vLLM measured with what servecap predicts.

    python bench/vllm_latency.py             # the table (markdown) and the median errors
    python bench/vllm_latency.py --json      # one object per comparison, and the summary
    python bench/vllm_latency.py --only sglang_vllm060_a100_h100   # one fixture file
    python bench/vllm_latency.py --without-engine   # before: the roofline alone, --engine plain
    python bench/vllm_latency.py --fit       # sim/vllm_engine.py's six fitted constants

Each fixture file names its source, vLLM version, GPU, tensor parallelism, launch flags,
request shape and load (tests/fixtures/vllm_bench/SOURCE.md). A run is simulated with
`--engine vllm==<engine_pin>` (the fixture's row of servecap's vLLM table) and the launch
flags it states. ShareGPT runs draw real per-request lengths from
sharegpt_v3_first_turn_lengths.csv: the first turn of ShareGPT V3 conversations counted with the
run's model's tokenizer, under the benchmarks' filter (a resample of the dataset, not the
benchmark's own draw; SOURCE.md). Every request is measured (as `vllm bench serve` does),
not only the steady-state window.

error = (predicted - measured) / measured. The last column says whether the measurement lies
inside servecap's own 95 % interval of the figure (simulate's steady-state window; 'none'
where the run never settles or the figure has no interval): a miss outside it is the model's,
not the sampling's. Families: ttft (median TTFT), tpot (median TPOT,
median ITL, and the batch latency of the offline latency tests, all decode-bound) and
throughput (request or output-token throughput with every prompt sent at once). The summary
is given three times: over every comparison, without the spread-bound runs (a ShareGPT set of
at most 1,000 prompts sent at once lasts as long as its longest request, which the resampled
lengths only approximate), and out of sample (without the comparisons a constant is fitted
on, FITS).
"""

import json
import statistics
import sys
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sharegpt_sample import FIXTURES, SHAREGPT, sharegpt_draw, sharegpt_means  # noqa: E402

from servecap.cli.sim_inputs import SimFlags, build_setup  # noqa: E402
from servecap.cli.simulate_cmd import default_policy, run_simulation  # noqa: E402
from servecap.sim.sampling import draw_requests  # noqa: E402
from servecap.sim.workload import Arrivals, Lengths, Workload  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
# The tokenizer (a column of the sample) each ShareGPT run's model counts tokens with
SHAREGPT_TOKENIZERS = {"llama-3": "llama3", "mixtral": "mistral"}
# measured key -> (family, how the prediction is read from a policy entry of simulate --json)
METRICS = {
    "median_ttft_ms": ("ttft", lambda e: e["ttft_ms"]["p50"]),
    "median_tpot_ms": ("tpot", lambda e: e["tpot_ms"]["p50"]),
    "median_itl_ms": ("tpot", lambda e: e["itl_ms"]["p50"]),
    "mean_latency_ms": ("tpot", lambda e: e["e2e_ms"]["mean"]),
    "request_throughput_rps": ("throughput", lambda e: e["achieved_rps"]),
    "output_throughput_tok_s": ("throughput", lambda e: e["output_tokens_per_s"]),
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
    name = case.group["model"]["servecap"]
    return next(col for prefix, col in SHAREGPT_TOKENIZERS.items() if name.startswith(prefix))


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
    if case.run["shape"].get("dataset") != "sharegpt":
        return requests
    pairs = sharegpt_draw(len(requests), folder, ignore_eos(case),
                          tokenizer=sharegpt_tokenizer(case))
    return [replace(r, prompt_tokens=p, output_tokens=o)
            for r, (p, o) in zip(requests, pairs, strict=True)]


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
           "enforce_eager": flags.get("enforce_eager", False)}
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
            window: bool = False) -> dict:
    """simulate's policy entry for the run, every request measured (window=True: the
    steady-state window and its intervals); engine=False: the same scheduler on the device's
    roofline alone (no --engine terms)."""
    flags = flags_for(case)
    if not engine:
        flags = replace(flags, engine="plain", num_scheduler_steps=1, enforce_eager=False)
    setup = build_setup(model_for(case), flags)
    setup = replace(setup, requests=requests_for(case, folder))
    if offline(case):  # vLLM's offline scripts drive the engine without the API server
        setup = replace(setup, coefficients=replace(setup.coefficients, frontend_s=0.0,
                                                    frontend_latency_s=0.0))
    report, _ = run_simulation(setup, window=window)
    return report["policies"][0]


def compare(case: Case, entry: dict, windowed: dict | None = None) -> list[dict]:
    """One row per measured figure servecap predicts. Under V0 multi-step scheduling a
    stream delivers its tokens in chunks of num_scheduler_steps and the client times one gap
    per chunk, so the ITL compared is that many token gaps."""
    rows, steps = [], case.group.get("flags", {}).get("num_scheduler_steps", 1)
    for key, value in case.run["measured"].items():
        if key not in METRICS:
            continue
        family, read = METRICS[key]
        predicted = read(entry) * (steps if key == "median_itl_ms" else 1)
        rows.append({"fixture": case.name, "setup": case.label, "load": case.load,
                     "metric": key, "family": family, "measured": value,
                     "spread_bound": spread_bound(case),
                     "in_sample": (case.name, key) in IN_SAMPLE,
                     "predicted": predicted, "error": error(predicted, value),
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


def summarize(rows: list[dict], known_shape: bool = False,
              out_of_sample: bool = False) -> dict:
    """Per family: comparisons, median |error|, the largest |error|, and whether the target
    (median within 15 %, none beyond 40 %) holds; known_shape: without the spread-bound
    runs; out_of_sample: without the comparisons --fit fits a constant on."""
    out = {}
    for family in FAMILIES:
        kept = [r for r in rows if r["family"] == family
                and not (known_shape and r.get("spread_bound"))
                and not (out_of_sample and r.get("in_sample"))]
        errs = [abs(r["error"]) for r in kept]
        if not errs:
            continue
        med, worst = statistics.median(errs), max(errs)
        misses = [r for r in kept if abs(r["error"]) > TARGET_MEDIAN]
        out[family] = {"comparisons": len(errs), "median_abs_error": round(med, 4),
                       "max_abs_error": round(worst, 4),
                       "within_target": med <= TARGET_MEDIAN and worst <= TARGET_MAX,
                       "misses_outside_interval": sum(r.get("interval") == "outside"
                                                      for r in misses)}
    return out


def run_all(folder: Path = FIXTURES, only: str | None = None, engine: bool = True) -> list[dict]:
    rows = []
    for case in load_cases(folder, only):
        rows.extend(compare(case, predict(case, folder, engine),
                            predict(case, folder, engine, window=True)))
    return rows


# What --fit fits: (constant in sim/vllm_engine.py, run, measured key, bracket in seconds)
FITS = (("V0_CPU_PER_SEQ_S", "sglang_vllm060_a100_h100:a100-8b-inf", "output_throughput_tok_s",
         (0.0, 1e-3)),
        ("V1_CPU_STEP_S", "kvcached_vllm019_qwen3_06b_h100:h100-qwen3-06b-rps16",
         "median_tpot_ms", (0.0, 5e-3)),
        ("V1_CPU_PER_SEQ_S", "kvcached_vllm019_qwen3_06b_h100:h100-qwen3-06b-inf",
         "median_itl_ms", (0.0, 1e-4)),
        ("EAGER_LAYER_S", "issue20469_qwen3_14b_awq_a100:a100-qwen3-14b-awq-c1-16k",
         "median_tpot_ms", (0.0, 2e-3)),
        ("FRONTEND_S", "buildkite9555_h100:h100-80gb-llama70B-tp4-qps1", "median_ttft_ms",
         (0.0, 0.1)),
        ("V1_FRONTEND_LATENCY_S", "kvcached_vllm019_qwen3_06b_h100:h100-qwen3-06b-rps16",
         "median_ttft_ms", (0.0, 0.1)))


# The (run, measured key) comparisons the fits are made on: in-sample
IN_SAMPLE = frozenset((run, key) for _, run, key, _ in FITS)


def fit(name: str, run: str, key: str, bracket: tuple[float, float]) -> float:
    """The value of sim/vllm_engine.py's `name` at which the run's prediction of `key`
    meets its measurement (bisection; the prediction is monotonic in either cost)."""
    from servecap.sim import vllm_engine

    case = next(c for c in load_cases() if c.name == run)
    measured, (low, high) = case.run["measured"][key], bracket
    saved = getattr(vllm_engine, name)
    sign = -1 if METRICS[key][0] == "throughput" else 1  # a cost lowers throughput
    try:
        for _ in range(30):
            mid = (low + high) / 2
            setattr(vllm_engine, name, mid)
            predicted = METRICS[key][1](predict(case))
            low, high = (mid, high) if sign * (predicted - measured) < 0 else (low, mid)
    finally:
        setattr(vllm_engine, name, saved)
    return (low + high) / 2


def markdown(rows: list[dict], summary: dict, known: dict | None = None,
             out_of_sample: dict | None = None) -> str:
    lines = ["| fixture | model / GPU / TP / version | load | metric | measured | predicted "
             "| error | 95 % interval |", "|---|---|---|---|---:|---:|---:|---|"]
    lines += [f"| {r['fixture']} | {r['setup']} | {r['load']} | {r['metric']} | "
              f"{r['measured']:g} | {r['predicted']:.4g} | {r['error']:+.1%} | "
              f"{r.get('interval', 'none')} |" for r in rows]
    lines += [""] + _summary_lines(summary)
    if known:
        lines += ["", "Without the spread-bound runs (ShareGPT sets of <= 1,000 prompts at once):",
                  ""] + _summary_lines(known)
    if out_of_sample:
        lines += ["", f"Out of sample (without the {len(IN_SAMPLE)} comparisons `--fit` fits "
                  "a constant on):", ""] + _summary_lines(out_of_sample)
    return "\n".join(lines)


def _summary_lines(summary: dict) -> list[str]:
    lines = ["| family | comparisons | median abs error | max abs error | target | misses > 15 % "
             "outside the interval |", "|---|---:|---:|---:|---|---:|"]
    return lines + [f"| {f} | {s['comparisons']} | {s['median_abs_error']:.1%} | "
                    f"{s['max_abs_error']:.1%} | {'met' if s['within_target'] else 'missed'} | "
                    f"{s['misses_outside_interval']} |" for f, s in summary.items()]


def main(argv: list[str]) -> int:
    if "--fit" in argv:
        for name, run, key, bracket in FITS:
            print(f"{name} = {fit(name, run, key, bracket):.3g}  # {run} {key}")
        return 0
    only = argv[argv.index("--only") + 1] if "--only" in argv else None
    rows = run_all(only=only, engine="--without-engine" not in argv)
    summary, known = summarize(rows), summarize(rows, known_shape=True)
    predicted = summarize(rows, out_of_sample=True)
    if "--json" in argv:
        print(json.dumps({"comparisons": rows, "summary": summary,
                          "summary_known_shape": known, "summary_out_of_sample": predicted},
                         indent=1))
    else:
        print(markdown(rows, summary, known, predicted))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
