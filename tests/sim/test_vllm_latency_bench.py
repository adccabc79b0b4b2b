"""The published vLLM benchmark runs (tests/fixtures/vllm_bench) and bench/vllm_latency.py's
table: every run parses, says where it comes from and simulates; errors and medians are the
arithmetic they claim; the set spans what it must (versions, engines, TP, GPUs, loads)."""

import importlib.util
import json
import math
import statistics
import sys
from pathlib import Path

import pytest

from servecap.ledger.devices import find

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("vllm_latency", ROOT / "bench" / "vllm_latency.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)
sample = sys.modules["sharegpt_sample"]  # the length sample bench/vllm_latency.py draws from
CASES = bench.load_cases()
LOADS = {"poisson", "all-at-once", "concurrency", "batch"}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_every_run_names_its_source_and_setup(case) -> None:
    src = case.data["source"]
    assert src.get("url", "").startswith("https://") or src.get("commit")
    assert case.data["engine"] in ("v0", "v1")
    assert case.data["vllm_version"] == "unknown" or case.data["vllm_version"][0].isdigit()
    assert case.data["engine_pin"] and case.data["engine_pin_note"]
    assert find(case.group["gpu"]["device"]) is not None, case.group["gpu"]
    assert case.group["tp"] >= 1 and case.group["launch"]
    assert case.run["load"]["kind"] in LOADS
    assert set(case.run["measured"]) & set(bench.METRICS), case.run["measured"]
    assert all(isinstance(v, int | float) and v > 0 for v in case.run["measured"].values())


def test_the_set_spans_versions_engines_tp_gpus_and_loads() -> None:
    versions = {".".join(c.data["vllm_version"].split(".")[:2]) for c in CASES
                if c.data["vllm_version"] != "unknown"}
    assert len(CASES) >= 25
    assert len(versions) >= 3, versions
    assert {c.data["engine"] for c in CASES} == {"v0", "v1"}
    assert {1, 2, 4, 8} <= {c.group["tp"] for c in CASES}
    assert len({c.group["gpu"]["device"] for c in CASES}) >= 2
    assert {c.run["load"]["kind"] for c in CASES} == LOADS


def test_run_ids_are_unique() -> None:
    names = [c.name for c in CASES]
    assert len(names) == len(set(names))


def test_sharegpt_filter_is_the_benchmarks() -> None:
    assert sample.sharegpt_keep(4, 4) and sample.sharegpt_keep(1024, 1024)
    assert not sample.sharegpt_keep(3, 100) and not sample.sharegpt_keep(100, 3)
    assert not sample.sharegpt_keep(1025, 10) and not sample.sharegpt_keep(1000, 1049)


def test_the_sharegpt_sample_is_real_first_turns_filtered() -> None:
    lines = (sample.FIXTURES / sample.SHAREGPT_SAMPLE).read_text().splitlines()
    assert lines[0] == "id,prompt_llama3,output_llama3,prompt_mistral,output_mistral"
    assert len(lines) == 17401
    assert lines[1:3] == ["QWJhYvA_0,35,245,37,277", "i6IyJda_0,18,72,19,78"]  # ShareGPT V3's
    for tokenizer, kept in (("llama3", 15822), ("mistral", 15500)):
        pool = sample.sharegpt_pool(tokenizer=tokenizer)
        assert len(pool) == kept and all(sample.sharegpt_keep(p, o) for p, o in pool)
        assert len({o for _, o in pool}) > 800  # a spread, not one length
        assert max(o for _, o in pool) > 1700  # the tail the filter allows (2,048 in all)


def test_the_samples_own_means_are_the_benchmarks() -> None:
    """Unscaled, the filtered Llama-3 counts average what the benchmarks' draws did: 215.2
    prompt tokens (vllm#7567's 1,000 prompts) and 194.3 output tokens with ignore_eos
    (SGLang's 5,000); Mistral's tokenizer counts more of both."""
    data = json.loads((sample.FIXTURES / sample.SHAREGPT).read_text())["measured"]
    target = sample.sharegpt_targets()
    assert target["prompt"] == data["total_input_tokens"] / 1000 == 215.196
    assert target["output"] == data["total_generated_tokens"] / 1000 == 178.793
    assert target["output_ignore_eos"] == pytest.approx(4132.37 / 21.27)
    pool, mistral = sample.sharegpt_pool(), sample.sharegpt_pool(tokenizer="mistral")
    assert statistics.fmean(p for p, _ in pool) == pytest.approx(target["prompt"], rel=0.03)
    assert statistics.fmean(o for _, o in pool) == \
        pytest.approx(target["output_ignore_eos"], rel=0.03)
    assert statistics.fmean(o for _, o in mistral) > 1.1 * statistics.fmean(o for _, o in pool)


def test_sharegpt_draws_are_seeded_pairs_and_eos_shortens_the_output() -> None:
    target, pool = sample.sharegpt_targets(), sample.sharegpt_pool()
    raw = sample.sharegpt_draw(len(pool), ignore_eos=True)  # the whole pool, shuffled
    assert sorted(raw) == sorted(pool)
    eos = sample.sharegpt_draw(len(pool))
    assert statistics.fmean(o for _, o in eos) == pytest.approx(target["output"], rel=0.01)
    assert [p for p, _ in eos] == [p for p, _ in raw]
    draw = sample.sharegpt_draw
    assert draw(200) == draw(200) != draw(200, seed=1)
    assert len(sample.sharegpt_draw(20000)) == 20000  # larger than the pool: reshuffled
    assert max(o for _, o in sample.sharegpt_draw(200, ignore_eos=True)) > 1000


def test_sharegpt_runs_get_the_sample_and_their_clients_eos_rule() -> None:
    by_name = {c.name: c for c in CASES}
    serving = by_name["buildkite9555_h100:h100-80gb-llama70B-tp4-qps1"]
    offline = by_name["buildkite9555_h100:h100-80gb-llama8B-tp1-throughput"]
    sglang = by_name["sglang_vllm060_a100_h100:a100-8b-rps4"]
    assert not bench.ignore_eos(serving) and bench.ignore_eos(offline)
    assert bench.ignore_eos(sglang)
    requests = bench.requests_for(serving)
    assert [(r.prompt_tokens, r.output_tokens) for r in requests] == sample.sharegpt_draw(200)
    assert [r.arrival_s for r in requests] == \
        [r.arrival_s for r in bench.draw_requests(bench.workload_for(serving))]
    mixtral = by_name["buildkite9555_h100:h100-80gb-mixtral8x7B-tp2-throughput"]
    assert bench.sharegpt_tokenizer(mixtral) == "mistral" != bench.sharegpt_tokenizer(offline)
    assert [(r.prompt_tokens, r.output_tokens) for r in bench.requests_for(mixtral)] == \
        sample.sharegpt_draw(200, ignore_eos=True, tokenizer="mistral")
    fixed = by_name["kvcached_vllm019_qwen3_06b_h100:h100-qwen3-06b-rps16"]
    assert {(r.prompt_tokens, r.output_tokens) for r in bench.requests_for(fixed)} == {(512, 128)}


def test_a_range_ratio_is_vllm_bench_serves_uniform_spread() -> None:
    spread = bench._spread(20000, 0.15)
    assert (spread.kind, spread.low, spread.high) == ("uniform", 17000, 23000)


def test_error_is_signed_and_relative_to_the_measurement() -> None:
    assert bench.error(110.0, 100.0) == pytest.approx(0.10)
    assert bench.error(80.0, 100.0) == pytest.approx(-0.20)


def test_summary_takes_median_and_worst_of_absolute_errors() -> None:
    rows = [{"family": "ttft", "error": e} for e in (-0.30, 0.10, 0.05)] + \
        [{"family": "tpot", "error": 0.41}]
    summary = bench.summarize(rows)
    assert summary["ttft"] == {"comparisons": 3, "median_abs_error": 0.10,
                               "max_abs_error": 0.30, "within_target": True,
                               "misses_outside_interval": 0}
    assert summary["tpot"]["within_target"] is False  # one comparison beyond 40 %
    assert "throughput" not in summary


@pytest.mark.slow
def test_every_fixture_simulates_into_the_table() -> None:
    rows = bench.run_all()
    expected = sum(len(set(c.run["measured"]) & set(bench.METRICS)) for c in CASES)
    assert len(rows) == expected
    assert {r["fixture"].split(":")[0] for r in rows} == {c.fixture for c in CASES}
    assert {r["interval"] for r in rows} <= {"inside", "outside", "none"}
    assert any(r["interval"] != "none" for r in rows)
    for row in rows:
        assert row["predicted"] > 0 and math.isfinite(row["error"])
        assert row["error"] == pytest.approx(bench.error(row["predicted"], row["measured"]),
                                             abs=1e-3)
    table = bench.markdown(rows, bench.summarize(rows))
    assert table.count("\n| ") >= len(rows) and "median abs error" in table


def test_spread_bound_runs_are_the_small_sharegpt_sets_sent_at_once() -> None:
    bound = {c.name for c in CASES if bench.spread_bound(c)}
    assert bound and all(c.run["load"]["kind"] == "all-at-once" and
                         c.run["load"]["num_prompts"] <= 1000 for c in CASES if c.name in bound)
    assert "sglang_vllm060_a100_h100:a100-8b-inf" not in bound  # 5,000 prompts
    rows = [{"family": "throughput", "error": 2.0, "spread_bound": True},
            {"family": "throughput", "error": 0.1, "spread_bound": False}]
    assert bench.summarize(rows)["throughput"]["comparisons"] == 2
    assert bench.summarize(rows, known_shape=True)["throughput"] == {
        "comparisons": 1, "median_abs_error": 0.1, "max_abs_error": 0.1, "within_target": True,
        "misses_outside_interval": 0}


def test_in_sample_comparisons_are_the_fits_and_leave_the_out_of_sample_summary() -> None:
    assert len(bench.IN_SAMPLE) == len(bench.FITS) == 6
    names = {c.name: c for c in CASES}
    for run, key in bench.IN_SAMPLE:
        assert key in names[run].run["measured"] and key in bench.METRICS
    rows = [{"family": "tpot", "error": 0.0, "in_sample": True},
            {"family": "tpot", "error": 0.2, "in_sample": False},
            {"family": "tpot", "error": 0.4, "in_sample": False}]
    assert bench.summarize(rows)["tpot"]["median_abs_error"] == 0.2
    assert bench.summarize(rows, out_of_sample=True)["tpot"]["median_abs_error"] == \
        pytest.approx(0.3)


def test_a_miss_is_judged_against_the_simulators_own_interval() -> None:
    steady = {"steady_state": True, "ttft_ms_ci": {"p50": [90.0, 110.0]},
              "itl_ms_ci": {"p50": [10.0, 12.0]}, "achieved_rps_ci": [1.0, None]}
    assert bench.interval_verdict("median_ttft_ms", 100.0, steady) == "inside"
    assert bench.interval_verdict("median_ttft_ms", 120.0, steady) == "outside"
    assert bench.interval_verdict("median_itl_ms", 110.0, steady, steps=10) == "inside"
    assert bench.interval_verdict("request_throughput_rps", 1.5, steady) == "none"
    assert bench.interval_verdict("median_ttft_ms", 100.0, {"steady_state": False}) == "none"
    assert bench.interval_verdict("mean_latency_ms", 100.0, steady) == "none"
    rows = [{"family": "ttft", "error": 0.3, "interval": "outside"},
            {"family": "ttft", "error": 0.3, "interval": "inside"},
            {"family": "ttft", "error": 0.05, "interval": "outside"}]
    assert bench.summarize(rows)["ttft"]["misses_outside_interval"] == 1


@pytest.mark.slow
def test_the_engine_terms_do_what_the_docs_say_on_the_published_set() -> None:
    """docs/vllm-latency.md's figures: --engine lowers every family's median error from
    --engine plain's (79.5 / 18.2 / 14.0 %); TPOT and throughput medians meet 15 % (TPOT
    7.5 %; throughput 8.3 %, 5.1 % without the spread-bound runs), and TTFT's too (9.1 %;
    16.0 % before V1's front-end latency); out of sample (without the six comparisons a
    constant is fitted on) 13.0 / 9.9 / 8.5 %;
    the single worst comparisons stay beyond 40 % (the target is missed); the 200-prompt
    ShareGPT sets sent at once, drawn from ShareGPT V3's first turns, are off by -26.5 % to
    +22.3 % (+31 % to +125 % on the scaled Sarathi-Serve trace, up to 239 % at the mean
    lengths)."""
    rows, bare = bench.run_all(), bench.run_all(engine=False)
    after, before = bench.summarize(rows), bench.summarize(bare)
    known = bench.summarize(rows, known_shape=True)
    for family in bench.FAMILIES:
        assert after[family]["median_abs_error"] < before[family]["median_abs_error"]
        assert after[family]["max_abs_error"] > bench.TARGET_MAX
    assert [before[f]["median_abs_error"] for f in bench.FAMILIES] == \
        pytest.approx([0.795, 0.182, 0.140], abs=0.001)
    assert after["ttft"]["median_abs_error"] == pytest.approx(0.091, abs=0.001)
    assert after["tpot"]["median_abs_error"] == pytest.approx(0.075, abs=0.001)
    assert after["throughput"]["median_abs_error"] == pytest.approx(0.083, abs=0.001)
    assert known["throughput"]["median_abs_error"] == pytest.approx(0.051, abs=0.001)
    predicted = bench.summarize(rows, out_of_sample=True)
    assert [predicted[f]["comparisons"] for f in bench.FAMILIES] == [10, 23, 24]
    assert [predicted[f]["median_abs_error"] for f in bench.FAMILIES] == \
        pytest.approx([0.130, 0.099, 0.085], abs=0.001)
    # the V1 host cost per sequence: the 500-prompt Qwen3-0.6B run's ITL is fitted, its
    # TPOT (-40.6 % with a host cost per step alone) and throughput are predicted
    qwen = {r["metric"]: r["error"] for r in rows
            if r["fixture"] == "kvcached_vllm019_qwen3_06b_h100:h100-qwen3-06b-inf"}
    assert qwen["median_itl_ms"] == pytest.approx(0.0, abs=0.005)
    assert qwen["median_tpot_ms"] == pytest.approx(-0.212, abs=0.001)
    assert qwen["request_throughput_rps"] == pytest.approx(0.041, abs=0.001)
    # V1's front-end latency: fitted on the 16 req/s run's median TTFT (-62.7 % without it);
    # the 500-prompt run's, set by the serial queue, is predicted (-17.5 % -> -16.7 %)
    rps16 = {r["metric"]: r["error"] for r in rows
             if r["fixture"] == "kvcached_vllm019_qwen3_06b_h100:h100-qwen3-06b-rps16"}
    assert rps16["median_ttft_ms"] == pytest.approx(0.0, abs=0.005)
    assert qwen["median_ttft_ms"] == pytest.approx(-0.167, abs=0.001)
    bound = [r["error"] for r in rows if r["spread_bound"]]
    assert len(bound) == 9 and min(bound) == pytest.approx(-0.265, abs=0.001)
    assert max(bound) == pytest.approx(0.223, abs=0.001)
