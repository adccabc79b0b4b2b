"""Rich rendering of simulation reports: the coefficients used, then one row per policy."""

import math

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from servecap.ledger.units import GB, TB, fmt_gib, plural
from servecap.sim.metrics import QUANTILES, percentile_key

from .hanging import print_hanging
from .narrow import print_table
from .steady_view import (
    INTERVAL_COLUMNS,
    interval_table,
    prediction_line,
    warning_line,
    window_line,
)


def render_coefficients(report: dict, console: Console) -> None:
    coef, pool = report["coefficients"], report["kv_pool"]
    console.print(f"[bold]{report['model']}[/] on {report['device']} | {report['source']} | "
                  f"{plural(report['num_requests'], 'request')}")
    # the release's terms and their sources follow on the engine line (all of it in --json)
    rates = coef["source"].split("; engine ")[0]
    rates = "device peaks" if rates == "roofline" else rates
    console.print(
        f"rates ({rates}): {coef['flops_per_s'] / TB:,.1f} TFLOP/s, "
        f"{coef['bandwidth_bytes_per_s'] / GB:,.1f} GB/s, "
        f"--step-overhead {coef['step_overhead_s'] * 1000:g} ms; weights read per iteration "
        f"{coef['weights_bytes']:,} B, KV {coef['kv_bytes_per_token']:,} B/token, "
        f"{coef['flops_per_token']:,} FLOPs/token, swap {coef['swap_bandwidth_bytes_per_s'] / GB:g}"
        f" GB/s")
    _render_step_model(coef, report.get("step_terms"), console)
    render_engine(report.get("engine"), coef, console)
    batch = report.get("batch")
    if batch:
        print_hanging(console, f"batch limits: {batch['max_num_batched_tokens']:,} tokens and "
                      f"{batch['max_num_seqs']:,} sequences per step, {batch['source']}")
    spec = report.get("speculation")
    if spec:
        console.print(f"speculative decoding: k = {spec['draft_length']}, a = "
                      f"{spec['acceptance']:g}, {spec['expected_tokens_per_step']:.2f} tokens "
                      f"per verification (mean-field), draft weights "
                      f"{spec['draft_coefficients']['weights_bytes']:,} B"
                      + (f", off above {spec['max_batch']} sequences" if spec["max_batch"]
                         else ""))
    console.print(f"single-stream decode bound {report['decode_bound_tokens_per_s']:,.1f} "
                  f"tokens/s; KV pool {pool['num_blocks']:,} blocks x "
                  f"{pool['block_size_tokens']} tokens ({fmt_gib(pool['pool_bytes'])}, the "
                  "ledger's: device - weights - runtime peak - safety)"
                  + (f"; each running request's fixed state takes "
                     f"{pool['state_blocks_per_request']:,} of them"
                     if pool.get("state_blocks_per_request") else ""))
    tier = report.get("kv_offload")
    if tier:
        console.print(f"KV offload tier (host): {tier['tokens']:,} tokens, "
                      f"{fmt_gib(tier['bytes_per_rank'])} a rank; a prefix evicted from the GPU "
                      f"but held there reloads at {tier['reload_bytes_per_s'] / GB:g} GB/s "
                      f"({tier['reload_link']})")


def _render_step_model(coef: dict, steps: dict | None, console: Console) -> None:
    """The terms beyond the roofline: efficiencies and their source, overheads, links."""
    if "gemm_efficiency" not in coef:
        return
    console.print(f"step model: {coef['efficiency_source']}; GEMM x{coef['gemm_efficiency']:g}"
                  f", attention x{coef['attention_efficiency']:g}, bandwidth "
                  f"x{coef['bandwidth_efficiency']:g} of those rates; "
                  f"{coef['num_layers']} layers x "
                  f"{coef['layer_overhead_s'] * 1e6:g} us; tp {coef['tensor_parallel_size']}, "
                  f"pp {coef['pipeline_parallel_size']}"
                  + (f"; {coef['num_experts']} experts, top {coef['experts_per_token']}"
                     if coef["num_experts"] else ""), highlight=False)
    if coef.get("collective_source"):
        calls = coef.get("collective_calls")
        console.print("collectives: " + (f"{calls} all-reduces per step of tokens x "
                      f"{coef['collective_message_bytes_per_token']:,} B, " if calls else "")
                      + coef["collective_source"], highlight=False)
    for name, parts in (steps or {}).items():
        print_hanging(console, f"{name.replace('_', ' ')}: {parts['step_s'] * 1000:.3f} ms = "
                      f"max(GEMM {parts['gemm_s'] * 1000:.3f} + attention "
                      f"{parts['attention_s'] * 1000:.3f}, memory {parts['memory_s'] * 1000:.3f})"
                      f" + collectives {parts['collective_s'] * 1000:.3f} + overhead "
                      f"{parts['overhead_s'] * 1000:.3f}"
                      f"{_engine_parts(parts, coef.get('cpu_overlap'))}")


def render_engine(engine: dict | None, coef: dict, console: Console) -> None:
    """Which release runs around the kernels (or plain), then its terms when it has any."""
    if engine:
        console.print(f"engine: {engine['about']}", highlight=False)
        if "host_gpu_overlap" in engine:
            verb = "overlap" if engine["host_gpu_overlap"] else "do not overlap"
            print_hanging(console, f"host and GPU {verb}: {engine['overlap_why']}")
    if not any(coef.get(k) for k in ("cpu_step_s", "cpu_per_seq_s", "eager_layer_s",
                                     "frontend_s", "frontend_latency_s")):
        return
    print_hanging(console, f"host {coef['cpu_step_s'] * 1e6:,g} us/step + "
                  f"{coef['cpu_per_seq_s'] * 1e6:,g} us/sequence"
                  f"{' (overlapped: async scheduling)' if coef['cpu_overlap'] else ''}; "
                  f"CUDA graphs up to {coef['graph_max_tokens']} tokens"
                  f"{'' if coef['graph_prefill'] else ', decode only'}, eager "
                  f"{coef['eager_layer_s'] * 1e6:,g} us/layer; API server "
                  f"{coef['frontend_s'] * 1000:,g} ms/request serial + "
                  f"{coef.get('frontend_latency_s', 0.0) * 1000:,g} ms latency")


def _engine_parts(parts: dict, overlap: float | None = None) -> str:
    """The engine's share of a reference step, when it has one: the host's time added, or
    overlapped with the GPU's (async scheduling: the step is the larger of the two)."""
    eager, cpu = parts.get("eager_s", 0.0), parts.get("cpu_s", 0.0)
    added = f" + eager {eager * 1000:.3f}" if eager else ""
    if cpu and overlap:
        return f"{added} ms (host {cpu * 1000:.3f} ms overlapped)"
    return added + (f" + host {cpu * 1000:.3f}" if cpu else "") + " ms"


def render_simulation(report: dict, console: Console) -> None:
    render_coefficients(report, console)
    counts = Table(title="policies: requests and throughput")
    for col in ("policy", "done", "rejected", "queued", "preempted", "in\ntok/s", "out\ntok/s",
                "goodput\nreq/s"):
        counts.add_column(col, justify="left" if col == "policy" else "right",
                          no_wrap=col == "policy")
    times = Table(title="latency ms: p50 / p99")
    for col in ("policy", "queue", "TTFT", "ITL", "TPOT", "e2e"):
        times.add_column(col, justify="left" if col == "policy" else "right",
                          no_wrap=col == "policy")
    many = len({p["deployment"] for p in report["policies"]}) > 1
    for p in report["policies"]:
        name = f"{p['policy']}\n{p['deployment']}" if many else p["policy"]
        counts.add_row(name, f"{p['completed']:,}", f"{p['rejected']:,}",
                       f"{p['queued']:,}", f"{p['preemptions']:,}",
                       tokens_per_s(p['input_tokens_per_s']),
                       tokens_per_s(p['output_tokens_per_s']),
                       f"{p['goodput_rps']:,.2f}")
        times.add_row(name, *(_pair(p[k]) for k in ("queue_ms", "ttft_ms", "itl_ms",
                                                           "tpot_ms", "e2e_ms")))
    print_table(console, counts, drop=("preempted", "queued", "in\ntok/s"))
    extra = report["policies"][0]["ttft_ms"].keys() - {"p50", "p95", "p99", "mean"}
    # p50 / p99 pairs that would wrap switch to one column per percentile
    narrow = Measurement.get(console, console.options.update_width(10_000),
                             times).maximum > console.width
    if extra or narrow:
        by_percentile = percentile_table(report)
        requested = tuple(percentile_key(q) for q in report["slo"].get("percentiles", ()))
        print_table(console, by_percentile, drop=least_needed(by_percentile, requested))
    else:
        print_table(console, times)
    console.print(f"percentiles: {report['percentile_method']}")
    print_table(console, interval_table([(p["policy"] + (f" {p['deployment']}" if many else ""), p)
                                  for p in report["policies"]]), wrap=INTERVAL_COLUMNS)
    slo = report.get("slo", {})
    slo_given = any(slo.get(k) is not None for k in ("ttft_s", "itl_s", "e2e_s"))
    for p in report["policies"]:
        console.print(f"{p['policy']}: {window_line(p, slo_given)}")
        if report.get("kv_offload") and "offload_hit_rate" in p:
            console.print(f"  prefix hits {p['prefix_hit_rate']:.1%} of offered prefix tokens, "
                          f"{p['offload_hit_rate']:.1%} loaded back from the host tier")
        warning = warning_line(p, p["policy"])
        if warning:
            console.print(warning, style="yellow")
        predicted = prediction_line(p, p["policy"])
        if predicted:
            console.print(predicted, highlight=False)
    for p in report["policies"]:
        for reason in p["rejection_reasons"]:
            console.print(f"{p['policy']}: rejected: {reason}")
        _render_tail(p, console)
        if p.get("tenants"):
            _render_tenants(p, console)
    for note in report.get("plan_notes", ()):
        console.print(f"note: {note}", style="yellow")


def tokens_per_s(value: float) -> str:
    """Whole tokens/s from 10 up; below, two significant digits, so a slow run's 0.34 does
    not print as 0 (an exact 0 stays 0)."""
    rounded = float(f"{value:.2g}")
    if rounded >= 10 or value == 0:
        return f"{value:,.0f}"
    return f"{rounded:.{max(1 - math.floor(math.log10(rounded)), 0)}f}"


def _render_tail(entry: dict, console: Console) -> None:
    """Why the tail is slow: the slowest requests' profile against everyone's."""
    tail = entry.get("tail")
    if not tail:
        return
    slow, every = tail["tail"], tail["all"]
    console.print(
        f"{entry['policy']}: slowest {tail['share']:.0%} by e2e ({tail['num_requests']}): "
        f"queue {slow['mean_queue_ms']:,.1f} vs {every['mean_queue_ms']:,.1f} ms, prompt "
        f"{slow['mean_prompt_tokens']:,.0f} vs {every['mean_prompt_tokens']:,.0f}, output "
        f"{slow['mean_output_tokens']:,.0f} vs {every['mean_output_tokens']:,.0f} tokens, "
        f"chunks {slow['mean_prefill_chunks']:g} vs {every['mean_prefill_chunks']:g}, "
        f"preemptions {slow['mean_preemptions']:g} vs {every['mean_preemptions']:g}")


def _render_tenants(entry: dict, console: Console) -> None:
    table = Table(title=f"{entry['policy']}: tenants (ms: p50 / p99)")
    for col in ("tenant", "priority", "requests", "SLO met", "queue", "TTFT", "e2e"):
        table.add_column(col, justify="left" if col == "tenant" else "right")
    for t in entry["tenants"]:
        table.add_row(t["tenant"], str(t["priority"]), f"{t['offered']:,}",
                      f"{t['slo_attainment']:.1%}",
                      *(_pair(t[k]) for k in ("queue_ms", "ttft_ms", "e2e_ms")))
    print_table(console, table)


def _pair(stats: dict) -> str:
    if stats["p99"] is None:
        return "-"
    return f"{stats['p50']:,.0f} / {stats['p99']:,.0f}" if stats["p99"] >= 1000 else \
        f"{stats['p50']:,.1f} / {stats['p99']:,.1f}"


LATENCY_KEYS = (("queue", "queue_ms"), ("TTFT", "ttft_ms"), ("ITL", "itl_ms"),
                ("TPOT", "tpot_ms"), ("e2e", "e2e_ms"))


def percentile_table(report: dict) -> Table:
    """One row per policy and metric, one column per percentile (and the max with
    --percentiles), so any number of percentiles stays within 80 columns."""
    first = report["policies"][0]["ttft_ms"]
    columns = sorted((k for k in first if k.startswith("p")), key=lambda k: float(k[1:]))
    columns += ["max"] if "max" in first else []
    table = Table(title="latency ms by percentile")
    for col in ("policy", "metric", *columns):
        table.add_column(col, justify="left" if col in ("policy", "metric") else "right")
    for p in report["policies"]:
        for label, key in LATENCY_KEYS:
            stats = p[key]
            table.add_row(p["policy"], label, *(_ms(stats.get(c)) for c in columns))
    return table


def least_needed(table: Table, requested: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The percentile columns a narrow terminal loses first: the defaults nobody asked for
    when --percentiles names some (p95 for 50,90,99,99.9), then those between p50 and p99,
    then the max, then p99 (p50 stays unless it is a default nobody asked for)."""
    headers = [str(c.header) for c in table.columns if _is_percentile(str(c.header))]
    middle = [h for h in headers if h not in ("p50", "p99")]
    order = (*reversed(middle), "max", "p99")
    if not requested:
        return order
    defaults = {name for name, _ in QUANTILES}
    unasked = [h for h in order if h in defaults and h not in requested]
    unasked += ["p50"] if "p50" in headers and "p50" not in requested else []
    return (*unasked, *(h for h in order if h not in unasked))


def _is_percentile(header: str) -> bool:
    """p50, p99.9: a percentile column (not the policy or metric one)."""
    return header.startswith("p") and header[1:].replace(".", "", 1).isdigit()


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}" if value >= 1000 else f"{value:,.1f}"
