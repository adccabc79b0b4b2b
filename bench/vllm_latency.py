"""Run every published vLLM benchmark run in tests/fixtures/vllm_bench through `simulate` and
compare what vLLM measured with what servecap predicts.

    python bench/vllm_latency.py                          # the shipped terms: every comparison
    python bench/vllm_latency.py --leave-one-source-out   # refit: in and out of sample, intervals
    python bench/vllm_latency.py --leave-one-source-out --write   # ... and keep the fit
    python bench/vllm_latency.py --json                   # one object per comparison, summary
    python bench/vllm_latency.py --only gpustack_vllm011_qwen3    # one fixture file
    python bench/vllm_latency.py --held-out               # runs from sources never fitted on
        # (tests/fixtures/vllm_bench_heldout) with the shipped terms, judged against the
        # shipped 95 % prediction interval; --json, --only work with it
    python bench/vllm_latency.py --without-engine         # --engine plain: roofline and tables
    python bench/vllm_latency.py --terms                  # the shipped fit and what informs it
    python bench/vllm_latency.py --releases               # each release's scheduling, cited
    python bench/vllm_latency.py --efficiency             # each catalog device's efficiency
    python bench/vllm_latency.py --leave-one-source-out --price-sampler  # an experiment: the
        # sampler's bytes per sampling request (ledger/sampler.py), measured, not adopted
    python bench/vllm_latency.py --leave-one-source-out --price-sampler --hold-streamed-token
        # ... with the API server's time per streamed token held at 0, not fitted
    python bench/vllm_latency.py --leave-one-source-out --eos-stop  # an experiment: a
        # random-dataset run whose client stopped at EOS draws its output lengths (a constant
        # chance per token, capped at max_tokens, the published mean), measured, not adopted
    python bench/vllm_latency.py --leave-one-source-out --microbatch-intake  # an experiment:
        # the API server's tokenizer micro-batch from v0.10.1 (requests that reach it
        # together go on together, sim/engine.py INTAKE), measured, not adopted
    python bench/vllm_latency.py --leave-one-source-out --burst-ttft-unweighted  # an
        # experiment: a burst's TTFT (every prompt at once) weighs 0 in the fit, as a
        # backlog's does, measured, not adopted
    python bench/vllm_latency.py --leave-one-source-out --vllm-pool  # an experiment: each run
        # schedules in the pool `plan --engine vllm==<release>` gives, measured, not adopted

error = (predicted - measured) / measured. The shipped terms (sim/engine_fit.json) were fitted
on every run, so the plain table is in sample; --leave-one-source-out refits them on every
run (in sample) and once without each source, predicting the source's runs with the terms
fitted on the others (out of sample), and judges each out-of-sample figure against its 95 %
prediction interval, sized by the other sources' out-of-sample errors (bench/vllm_fit.py).
Families: ttft (median or mean TTFT), tpot (TPOT, ITL, end-to-end and batch latency, all
decode-bound) and throughput (request, output or total token throughput)."""

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from vllm_cases import (  # noqa: E402,F401  (the test suite reads these through this module)
    FAMILIES,
    FIXTURES,
    HELD_OUT,
    INTERVALS,
    METRICS,
    Case,
    _spread,
    compare,
    error,
    fell_behind,
    flags_for,
    ignore_eos,
    interval_verdict,
    load_cases,
    offline,
    predict,
    requests_for,
    scaled_to,
    sharegpt_tokenizer,
    spread_bound,
    workload_for,
)
from vllm_experiments import (  # noqa: E402,F401  (the test suite reads these here too)
    BURST,
    EOS,
    MICROBATCH,
    SAMPLER,
    VLLM_POOL,
    sampler_state_bytes,
)
from vllm_fit import HELD, HELD_WITH_SAMPLER  # noqa: E402
from vllm_loso import judged, leave_one_source_out, summary, write_fit  # noqa: E402

from servecap.sim.model_error import MODEL_ERROR  # noqa: E402
from servecap.sim.vllm_engine import FIT_FILE  # noqa: E402
from servecap.sim.vllm_releases import overlap, scheduling_for  # noqa: E402

TARGET_MEDIAN, TARGET_TTFT, TARGET_INSIDE = 0.15, 0.20, 0.80
# The experiments: measured through the refit and not adopted (docs/vllm-latency.md), so
# simulate does not run them and the fit they print is not kept (--write refused)
EXPERIMENTS = ("--price-sampler", "--eos-stop", "--microbatch-intake", "--vllm-pool",
               "--burst-ttft-unweighted")


def run_all(folder: Path = FIXTURES, only: str | None = None, engine: bool = True,
            sample: Path | None = None) -> list[dict]:
    """Every run of `folder` with the shipped terms, and the simulator's own sampling interval;
    `sample`: the folder whose ShareGPT sample ShareGPT runs draw from (`folder`'s own unless
    given)."""
    rows, sample = [], sample or folder
    for case in load_cases(folder, only):
        rows.extend(compare(case, predict(case, sample, engine),
                            predict(case, sample, engine, window=True)))
    return rows


def held_out_main(argv: list[str]) -> int:
    """The held-out runs (tests/fixtures/vllm_bench_heldout, sources the fit never read)
    predicted with the shipped terms, no refit, each figure judged against the 95 %
    prediction interval the shipped model error gives (sim/engine_fit.json model_error,
    what simulate's prediction intervals are built on)."""
    fitted = {c.source for c in load_cases()}
    shared = sorted({c.source for c in load_cases(HELD_OUT)} & fitted)
    if shared:
        print(f"{HELD_OUT.name}: source_id {shared[0]!r} is also in {FIXTURES.name}; "
              "held-out runs must come from sources the fit never read", file=sys.stderr)
        return 2
    rows = judged(run_all(HELD_OUT, only=_only(argv), sample=FIXTURES),
                  MODEL_ERROR["families"])
    if not rows:
        print(f"--only {_only(argv)}: no such file in {HELD_OUT.name}", file=sys.stderr)
        return 2
    held = summary(rows)
    if "--json" in argv:
        print(json.dumps({"comparisons": rows, "summary": held,
                          "model_error": MODEL_ERROR}, indent=1))
        return 0
    title = (f"Held out (sources the fit never read; shipped terms, interval from the "
             f"{MODEL_ERROR['date']} fit's model error):")
    print("\n".join([markdown(rows, judged_only=True), ""] + summary_lines(title, held)))
    return 0


def summarize(rows: list[dict], known_shape: bool = False) -> dict:
    """Per family: comparisons, median and largest |error|; known_shape: without the
    spread-bound runs (small ShareGPT sets sent at once)."""
    out = {}
    for family in FAMILIES:
        errs = [abs(r["error"]) for r in rows if r["family"] == family
                and not (known_shape and r.get("spread_bound"))]
        if errs:
            out[family] = {"comparisons": len(errs),
                           "median_abs_error": round(statistics.median(errs), 4),
                           "max_abs_error": round(max(errs), 4)}
    return out


def markdown(rows: list[dict], oos: dict | None = None, judged_only: bool = False) -> str:
    """The comparison table; with out-of-sample rows (keyed fixture, metric), their figure,
    interval and verdict beside the in-sample one; judged_only: rows that carry their own
    interval and verdict (the held-out runs), those beside the figure."""
    head = "| fixture | model / GPU / TP / version | load | metric | measured | predicted | error |"
    rule = "|---|---|---|---|---:|---:|---:|"
    if oos:
        head += " out of sample | error | 95 % prediction interval | inside |"
        rule += "---:|---:|---|---|"
    elif judged_only:
        head += " 95 % prediction interval | inside |"
        rule += "---|---|"
    lines = [head, rule]
    for r in rows:
        line = (f"| {r['fixture']} | {r['setup']} | {r['load']} | {r['metric']} | "
                f"{r['measured']:g} | {r['predicted']:.4g} | {r['error']:+.1%} |")
        o = (oos or {}).get((r["fixture"], r["metric"]))
        if o is not None:
            line += f" {o['predicted']:.4g} | {o['error']:+.1%} |" + _verdict_cells(o)
        elif judged_only:
            line += _verdict_cells(r)
        lines.append(line)
    return "\n".join(lines)


def _verdict_cells(row: dict) -> str:
    """A judged row's 95 % prediction interval and whether the measurement lies inside."""
    lo, hi = row["prediction_interval"] or (None, None)
    band = f"{lo:.4g} - {hi:.4g}" if lo is not None else "none"
    return f" {band} | {({True: 'yes', False: 'no', None: 'none'}[row['covered']])} |"


def summary_lines(title: str, s: dict) -> list[str]:
    """The summary's table; out of sample, with each family's share inside its 95 %
    prediction interval beside its error."""
    judged = "inside_95_interval" in s
    extra = (" inside 95 % interval |", "---:|") if judged else ("", "")
    lines = [title, "", "| family | comparisons | median abs error |" + extra[0],
             "|---|---:|---:|" + extra[1]]
    for name, v in [*s["families"].items(), ("every figure", s)]:
        cell = f" {_share(v.get('inside_95_interval'))} |" if judged else ""
        lines.append(f"| {name} | {v['comparisons']} | {v['median_abs_error']:.1%} |" + cell)
    lines.append("")
    lines.append(f"{s['runs']} runs from {s['sources']} "
                 f"{'source' if s['sources'] == 1 else 'sources'}.")
    if "inside_95_interval" in s:
        lines.append(f"Inside their 95 % prediction interval: {s['inside_95_interval']:.1%}.")
    return lines


def _share(x: float | None) -> str:
    return "none judged" if x is None else f"{x:.1%}"


def verdicts(oos: dict) -> list[str]:
    """The issue's targets on the out-of-sample figures, each met or missed."""
    fam = oos["families"]
    checks = [("median |error| <= 15 %", oos["median_abs_error"] <= TARGET_MEDIAN,
               oos["median_abs_error"]),
              ("TTFT median |error| <= 20 %", fam["ttft"]["median_abs_error"] <= TARGET_TTFT,
               fam["ttft"]["median_abs_error"]),
              (">= 80 % inside the 95 % interval", oos["inside_95_interval"] >= TARGET_INSIDE,
               oos["inside_95_interval"]),
              (">= 60 runs from >= 8 sources", oos["runs"] >= 60 and oos["sources"] >= 8,
               f"{oos['runs']} runs, {oos['sources']} sources")]
    return [f"- {name}: {'met' if ok else 'missed'} ({v if isinstance(v, str) else f'{v:.1%}'})"
            for name, ok, v in checks]


def regime(case: Case) -> str:
    """The run's load regime: an open loop at a rate, a closed loop at a concurrency, every
    request at once through the API server, or an offline batch (no API server)."""
    if offline(case):
        return "offline batch"
    return {"poisson": "open loop (rate)", "concurrency": "closed loop (concurrency)",
            "all-at-once": "all at once"}[case.run["load"]["kind"]]


def release_kind(case: Case) -> str:
    """V0, or V1 with or without async scheduling (the release's default or the run's flag,
    sim/vllm_releases.py)."""
    if case.data["engine"] == "v0":
        return "V0"
    version = tuple(int(x) for x in case.data["engine_pin"].split("."))
    ov = overlap(scheduling_for(version), case.group.get("flags", {}).get("async_scheduling"))
    return "V1, async scheduling" if ov.overlap else "V1, no async scheduling"


def breakdown_lines(rows: list[dict], cases: list[Case], family: str = "ttft") -> list[str]:
    """The family's out-of-sample errors grouped by load regime, by release and by source:
    median |error| and median signed error (+: predicted above measured), to show where the
    error comes from."""
    by_name = {c.name: c for c in cases}
    lines = [f"{family.upper()} out of sample, by group:", "",
             "| grouped by | group | comparisons | median abs error | median signed error |",
             "|---|---|---:|---:|---:|"]
    for title, key in (("load regime", regime), ("release", release_kind),
                       ("source", lambda c: c.source)):
        groups: dict[str, list[float]] = {}
        for r in rows:
            if r["family"] == family:
                groups.setdefault(key(by_name[r["fixture"]]), []).append(r["error"])
        lines += [f"| {title} | {g} | {len(e)} | {statistics.median(abs(x) for x in e):.1%} | "
                  f"{statistics.median(e):+.1%} |" for g, e in sorted(groups.items())]
    return lines


def terms_lines(every: dict) -> list[str]:
    lines = ["| term | value | fitted | runs informing | sources informing |",
             "|---|---:|---|---:|---|"]
    for name, value in every["values"].items():
        if name not in every["informs"]:
            continue
        info = every["informs"][name]
        lines.append(f"| {name} | {value:.4g} | {'yes' if name in every['free'] else 'no'} | "
                     f"{len(info['runs'])} | {', '.join(info['sources'])} |")
    return lines


def loso_main(argv: list[str]) -> int:
    cases = load_cases(only=_only(argv))
    t0 = time.process_time()
    result = leave_one_source_out(cases, log=lambda m: print(m, file=sys.stderr))
    cpu = time.process_time() - t0
    ins, oos = summary(result["in_sample"]), summary(result["out_of_sample"])
    if "--write" in argv:
        write_fit(result, "python bench/vllm_latency.py " + " ".join(argv))
    if "--json" in argv:
        print(json.dumps({"in_sample": ins, "out_of_sample": oos, "folds": result["folds"],
                          "terms": result["every"]["values"],
                          "comparisons": result["out_of_sample"]}, indent=1))
        return 0
    by_key = {(r["fixture"], r["metric"]): r for r in result["out_of_sample"]}
    print("\n".join(terms_lines(result["every"]) + [""]
                    + summary_lines("In sample (terms fitted on every run):", ins) + [""]
                    + summary_lines("Out of sample (each source predicted by the terms fitted "
                                    "without it):", oos) + [""] + verdicts(oos) + [""]
                    + breakdown_lines(result["out_of_sample"], cases) + [""]
                    + [markdown(result["in_sample"], by_key), "",
                       f"CPU time: {cpu:.0f} s."]))
    return 0


def _only(argv: list[str]) -> str | None:
    return argv[argv.index("--only") + 1] if "--only" in argv else None


def terms_table() -> str:
    """The shipped fit (sim/engine_fit.json): each term, whether fitted, what informs it,
    the sources' hardware factors and the out-of-sample model error per family."""
    data = json.loads(FIT_FILE.read_text(encoding="utf-8"))
    lines = [f"Fitted {data['date']} (`{data['command']}`).", "",
             "| term | what | value | fitted | runs informing | sources informing |",
             "|---|---|---:|---|---:|---|"]
    lines += [f"| {n} | {t['what']} | {t['value']:.4g} | {'yes' if t['fitted'] else 'no'} | "
              f"{t['informed_by_runs']} | {', '.join(t['informed_by_sources'])} |"
              for n, t in data["terms"].items()]
    lines += ["", "| source | hardware factor g |", "|---|---:|"]
    lines += [f"| {s} | {g:.3f} |" for s, g in data["hardware_factors"].items()]
    lines += ["", "| family | out-of-sample comparisons | 2.5 % ln(p/m) | 97.5 % ln(p/m) |",
              "|---|---:|---:|---:|"]
    lines += [f"| {f} | {e['comparisons']} | {e['log_q025']:+.3f} | {e['log_q975']:+.3f} |"
              for f, e in data["model_error"].items()]
    return "\n".join(lines)


def releases_table() -> str:
    """sim/vllm_releases.py's rows: what each vLLM release does in scheduling, cited."""
    from servecap.ledger.vllm_batch import RULES
    from servecap.sim.vllm_releases import table_rows
    lines = ["| from | async scheduling | CUDA graphs | batch defaults | source (at the tag) |",
             "|---|---|---|---|---|"]
    lines += [f"| {r['tag']} | {r['async_scheduling']} | {r['cudagraph_mode']} | "
              f"{r['batch_defaults']} | {r['source']} |" for r in table_rows()]
    lines += ["", "The batch defaults by release (ledger/vllm_batch.py, the rule the memory "
              "plan's profile pass reads too):", "",
              "| from | larger defaults for | source (at the tag) |", "|---|---|---|"]
    lines += [f"| {r.tag} | {r.kind} | {r.source} |" for r in RULES]
    return "\n".join(lines)


def efficiency_table() -> str:
    """Every catalog device's efficiency: measured, or derated by a stated rule."""
    from servecap.ledger.devices import DEVICES
    from servecap.sim.efficiency import DERATED, for_device
    lines = ["| device | GEMM | bandwidth | from |", "|---|---:|---:|---|"]
    for device in DEVICES:
        eff = for_device(device.name)
        if device.name in DERATED:
            compute, memory, why = DERATED[device.name]
            how = f"derated: {compute}'s compute, {memory}'s bandwidth share ({why})"
        else:
            how = "measured: aiconfigurator-core 0.12.0 kernel database"
        lines.append(f"| {device.name} | {eff.gemm_efficiency:.3f} | "
                     f"{eff.bandwidth_efficiency:.3f} | {how} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    for flag, table in (("--terms", terms_table), ("--releases", releases_table),
                        ("--efficiency", efficiency_table)):
        if flag in argv:
            print(table())
            return 0
    tried = [flag for flag in EXPERIMENTS if flag in argv]
    if tried and "--write" in argv:
        print(f"{tried[0]}: an experiment simulate does not run; not with --write",
              file=sys.stderr)
        return 2
    if "--price-sampler" in argv:
        SAMPLER["priced"] = True
        if "--hold-streamed-token" in argv:
            HELD.update(HELD_WITH_SAMPLER)
    elif "--hold-streamed-token" in argv:
        print("--hold-streamed-token: a variant of --price-sampler; only with it",
              file=sys.stderr)
        return 2
    MICROBATCH["on"] = "--microbatch-intake" in argv
    EOS["stop"] = "--eos-stop" in argv
    VLLM_POOL["on"] = "--vllm-pool" in argv
    BURST["out"] = "--burst-ttft-unweighted" in argv
    if "--leave-one-source-out" in argv:
        return loso_main(argv)
    if "--held-out" in argv:
        if tried or "--without-engine" in argv:
            print(f"--held-out: the shipped terms as simulate runs them; not with "
                  f"{(tried or ['--without-engine'])[0]}", file=sys.stderr)
            return 2
        return held_out_main(argv)
    rows = run_all(only=_only(argv), engine="--without-engine" not in argv)
    stored = json.loads(FIT_FILE.read_text(encoding="utf-8")) if FIT_FILE.exists() else {}
    if "--json" in argv:
        print(json.dumps({"comparisons": rows, "summary": summarize(rows),
                          "summary_known_shape": summarize(rows, known_shape=True),
                          "fit": {k: stored.get(k) for k in ("date", "summary_in_sample",
                                                             "summary_out_of_sample")}},
                         indent=1))
        return 0
    lines = [markdown(rows), "", "| family | comparisons | median abs error | max abs error |",
             "|---|---:|---:|---:|"]
    lines += [f"| {f} | {s['comparisons']} | {s['median_abs_error']:.1%} | "
              f"{s['max_abs_error']:.1%} |" for f, s in summarize(rows).items()]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
