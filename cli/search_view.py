"""The search report as rich tables that fit 80 columns, and the one-line infeasible verdict."""

from rich import box
from rich.console import Console
from rich.table import Table

from servecap.ledger.units import plural

from .hanging import print_hanging
from .narrow import print_table
from .steady_view import bounds, half, share_cell

SHORT_DTYPE = {"bf16": "bf16", "fp16": "fp16", "fp8": "fp8", "int8": "i8", "int4": "i4",
               "fp4": "fp4", "fp32": "fp32"}


def short_label(row: dict) -> str:
    """'h200 tp4 fp8/fp8 256/8k x2': device, parallelism, weight/KV dtype, seqs/tokens, shape."""
    par = f"tp{row['tensor_parallel_size']}" + (f"pp{row['pipeline_parallel_size']}"
                                                if row["pipeline_parallel_size"] > 1 else "") \
        + ("ep" if row.get("expert_parallel") else "")
    tokens = row["max_num_batched_tokens"]
    budget = f"{tokens // 1024}k" if tokens % 1024 == 0 else str(tokens)
    shape = (f"{row['prefill_replicas']}P+{row['decode_replicas']}D"
             if row["mode"] == "disaggregated" else f"x{row['replicas']}")
    return (f"{row['device'].split('-')[0]} {par} {SHORT_DTYPE[row['weight_dtype']]}/"
            f"{SHORT_DTYPE[row['kv_dtype']]} {row['max_num_seqs']}/{budget} {shape}")


def _ms(value) -> str:
    """Whole milliseconds, at every size: a column holds one unit (an overloaded tail reads
    '13,412', never '13s' beside '620')."""
    return "-" if value is None else f"{value:,.0f}"


DROP = ("tok/s\n/user", "$/h")  # at 80 columns, when a 6-digit tail needs the room
MARK = {"meets": "", "marginal": "~", "misses": "x"}


def _met(row: dict) -> str:
    """'97±4~': SLO attainment in %, half its 95 % interval's width (or '100 (88-100)', its
    bounds, where it is not symmetric), the verdict's mark."""
    text = share_cell(row["slo_attainment"], row.get("slo_attainment_ci"))
    return text + MARK[row.get("verdict", "meets" if row["meets_slo"] else "misses")]


def candidate_table(title: str, rows: list[dict]) -> Table:
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
                  padding=(0, 1, 0, 0))
    table.add_column("deployment", no_wrap=True)
    for col in ("GPUs", "$/h", "tok/s\n/GPU", "tok/s\n/user", "TTFT\np99", "TPOT\np99",
                "SLO\nmet %"):
        table.add_column(col, justify="right", no_wrap=True)
    for row in rows:
        user = row["tokens_per_s_per_user"]
        table.add_row(short_label(row), str(row["num_gpus"]), f"{row['cost_usd_per_hour']:.2f}",
                      f"{row['tokens_per_s_per_gpu']:,.0f}",
                      "-" if user is None else f"{user:,.0f}", _ms(row["ttft_ms"]["p99"]),
                      _ms(row["tpot_ms"]["p99"]), _met(row))
    return table


def render_search(report: dict, console: Console, top: int = 10) -> None:
    space = report["space"]
    skipped = sum(space["skipped_monotonic"].values())
    console.print(f"{space['num_candidates']:,} candidates in {space['num_layouts']:,} "
                  f"layouts: {space['memory_pruned']:,} fail memory, {space['invalid']:,} "
                  f"invalid, {skipped:,} skipped by monotonicity, {space['simulated']:,} "
                  f"simulated at {report['rate_per_s']:g} req/s ({report['elapsed_s']:.1f} s)")
    rows = report["candidates"][:top]
    if rows:
        print_table(console, candidate_table(f"ranked (best {len(rows)}; p99 in ms; SLO met % ± "
                                      f"half its 95 % interval, or (its bounds); x: misses the "
                                      f"{report['target_attainment']:.0%} target, ~: "
                                      "straddles it, not a pass)", rows), drop=DROP)
        print_table(console, candidate_table("Pareto frontier: tokens/s per GPU vs per user",
                                             report["frontier"]), drop=DROP)
    for device, price in report["prices"].items():
        # the source may hold parentheses of its own: after a semicolon, never nested
        console.print(f"price {device}: ${price['usd_per_gpu_hour']:g}/GPU-hour; "
                      f"{price['source']}", soft_wrap=False)
    for note in report["time_model_notes"]:
        console.print(f"note: {note}")
    best = report["cheapest"]
    if best is None:
        return
    console.print(f"cheapest meeting the SLOs: {short_label(best)}, "
                  f"{plural(best['num_gpus'], 'GPU')}, "
                  f"${best['cost_usd_per_hour']:.2f}/h" + _capacity(best, report))
    ttft, tpot = best["ttft_ms"], best["tpot_ms"]
    print_hanging(console, f"TTFT p50/p99 {_ms(ttft['p50'])}/{_ms(ttft['p99'])} ms, TPOT "
                  "p50/p99 "
                  f"{_ms(tpot['p50'])}/{_ms(tpot['p99'])} ms, goodput "
                  f"{best['goodput_rps']:,.2f} req/s, SLO met by {best['slo_attainment']:.1%} "
                  f"(TTFT {best['ttft_attainment']:.1%}, TPOT {best['tpot_attainment']:.1%})")
    _render_tie(report, console)
    for line in steady_warnings(report):
        console.print(f"warning: {line}", style="yellow")
    for engine, lines in report["launch"].items():
        console.print(launch_title(engine, report.get("engine")), style="bold")
        for line in lines:
            console.print(line, soft_wrap=True, highlight=False, markup=False)


def launch_title(name: str, engine: dict | None) -> str:
    """An engine's heading over its launch lines; vLLM's names the release search assumed."""
    if name != "vllm" or not engine:
        return f"{name}:"
    if engine["simulated"] == "plain":
        return f"vllm (memory planned with {engine['memory_rules']}'s rules; steps priced " \
            "with no engine terms, --engine plain):"
    default = ", the default: the newest known" if engine["default"] else ""
    return f"vllm (as simulated: {engine['simulated']}{default}):"


def _capacity(row: dict, report: dict) -> str:
    cap = row.get("capacity_rps")
    if not cap:
        return ""
    low, high = row["capacity_rps_ci"]
    text = (f", SLO capacity {cap:,.2f}{half(cap, row['capacity_rps_ci'])} req/s (95 %: "
            f"{bounds(row['capacity_rps_ci'])}, {row['capacity_limited_by']})")
    if high is not None and low <= report["rate_per_s"] <= high and low < high:
        text += f"; its interval straddles {report['rate_per_s']:g} req/s"
    return text


def _render_tie(report: dict, console: Console) -> None:
    tie = report.get("tie")
    if not tie:
        return
    rows = {r["label"]: r for r in report["candidates"]}
    console.print(f"tie: {tie['why']}:")
    for label in tie["labels"]:
        row = rows[label]
        print_hanging(console, f"{short_label(row)}: SLO met {_met(row)}"
                      + _capacity(row, report))


def steady_warnings(report: dict) -> list[str]:
    """One line per answer whose run, or capacity, did not reach steady state."""
    out = []
    for row in [report["cheapest"], *report["frontier"]]:
        if row is None or not row["meets_slo"]:
            continue
        if not row["steady_state"]:
            out.append(f"{short_label(row)}: not at steady state "
                       f"({row['steady_state_reason']}; {row['measured_requests']:,} of "
                       f"{row['simulated_requests']:,} requests measured): raise "
                       "--num-requests")
        elif row.get("capacity_steady_state") is False:
            out.append(f"{short_label(row)}: its SLO capacity run did not reach steady state; "
                       "raise --num-requests")
    return list(dict.fromkeys(out))


def infeasible_line(report: dict) -> str:
    """Which constraint bound when nothing qualified."""
    bound = report["binding_constraint"]
    where = f"at {report['rate_per_s']:g} req/s within --max-gpus {report['max_gpus']}"
    if bound == "memory":
        example = report["space"]["examples"].get("memory_pruned") or \
            report["space"]["examples"].get("invalid", "")
        return f"no deployment fits memory {where}; e.g. {example}"
    best = max(report["candidates"], key=lambda r: (r["slo_attainment"], r["label"]))
    return (f"no deployment meets the SLOs {where}: {bound} binds (closest: {best['label']}, "
            f"{best['ttft_attainment']:.0%} meet TTFT, {best['tpot_attainment']:.0%} meet TPOT, "
            f"target {report['target_attainment']:.0%})")
