"""SGLang and TensorRT-LLM startup logs: read line by line (ledger/engine_log.py), their memory
rules checked against each real log (tests/fixtures/sglang_logs, trtllm_logs) as `servecap
reconcile --engine sglang|trtllm` plans them."""

import importlib.util
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from servecap.cli.app import app
from servecap.ledger.engine_log import SGLANG, TRTLLM, parse_engine_log
from servecap.ledger.errors import SpecError

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
_spec = importlib.util.spec_from_file_location("engine_logs", ROOT / "bench" / "engine_logs.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def test_sglang_lines_are_read():
    facts = parse_engine_log((FIXTURES / "sglang_logs" / "sglang_qwq32b_4xl4_llmsinclouds.log")
                             .read_text(), SGLANG)
    assert (facts.free_at_start_gib, facts.weights_gib, facts.after_weights_gib) == \
        (21.63, 15.54, 6.09)
    assert (facts.kv_tokens, facts.pool_gib, facts.fraction) == (46_611, 2.84, 0.85)
    assert (facts.tensor_parallel_size, facts.context_len) == (4, 131_072)
    assert any(line.read.startswith("kv_tokens") for line in facts.lines)


def test_trtllm_lines_are_read():
    facts = parse_engine_log((FIXTURES / "trtllm_logs" /
                              "trtllm_llama31_8b_fp8_h100_issue6294.log").read_text(), TRTLLM)
    assert (facts.kv_pool_gib, facts.kv_tokens, facts.tokens_per_block) == (52.51, 860_320, 32)
    assert facts.fraction == pytest.approx(0.8) and facts.max_tokens == 860_308


def test_trtllms_pytorch_flow_pool_is_the_one_after_its_profile():
    """The PyTorch flow sizes a small estimation cache first (8,224 tokens on the DGX Spark's
    gpt-oss-120b), profiles, then builds the cache again: the pool read is the one after the
    'Peak memory during memory usage profiling' line, and neither pass's max_tokens warning is
    read as the user's cap (the second is the profile's own result)."""
    facts = parse_engine_log((FIXTURES / "trtllm_logs" /
                              "trtllm_gptoss_120b_gb10_jeansblog.log").read_text(), TRTLLM)
    assert (facts.kv_pool_gib, facts.kv_tokens, facts.max_tokens) == (5.95, 86_720, None)
    assert (facts.peak_gib, facts.available_kv_gib, facts.total_gib) == (113.65, 5.95, 119.7)
    assert facts.model is None  # "Starting trtllm-serve for model ..." is the script's echo


def test_a_log_without_the_engines_lines_is_refused_naming_the_reader():
    with pytest.raises(SpecError, match="none of trtllm's KV cache lines"):
        parse_engine_log("INFO GPU KV cache size: 1,024 tokens", TRTLLM)


def test_sglangs_rule_on_its_own_lines_is_its_arithmetic():
    """(free after the weights - free before x (1 - mem_fraction_static)) GiB // bytes a
    token: 46,620 against the 46,611 QwQ-32B's log allocated on 4 x L4 (the GB figures are
    rounded to 0.01)."""
    outcome = bench.evaluate(*next((log, meta) for log, meta in bench.cases()
                                   if "qwq32b" in log.name))
    assert outcome.from_lines == 46_620 and outcome.logged_tokens == 46_611


def test_trtllms_engine_flow_rule_on_its_own_lines():
    """C++ engine flow: 'available: 17.83 GiB' x kv_cache_free_gpu_mem_fraction 0.9 // 65,536 B
    a token (FP8 KV), whole blocks of 32: 262,912 against the 263,008 the RTX 5090 allocated
    (the GiB figure is rounded to 0.01)."""
    outcome = bench.evaluate(*next((log, meta) for log, meta in bench.cases()
                                   if "issue4275" in log.name))
    assert outcome.from_lines == 262_912 and outcome.logged_tokens == 263_008


def test_trtllm_max_tokens_caps_the_pool_in_whole_blocks():
    """free_gpu_memory_fraction 0.8 and max_tokens 860,308: 'the smaller value will be used',
    ceil(860,308 / 32) blocks of 32 = 860,320 tokens, as logged."""
    outcome = bench.evaluate(*next((log, meta) for log, meta in bench.cases()
                                   if "issue6294" in log.name))
    assert outcome.predicted_tokens == outcome.logged_tokens == 860_320


def test_sglangs_max_total_tokens_is_read_and_caps_the_rule_on_the_logged_lines():
    """SGLang's docs CI runs with max_total_tokens=20480: the cap is read from server_args and
    holds in the plan and in the engine's rule on its own lines (uncapped, the same lines give
    (63.70 - 78.81 x 0.12) GiB // 131,072 B = 444,357 tokens)."""
    log = FIXTURES / "sglang_logs" / "sglang_llama31_8b_80gb_docsci_2025_03.log"
    facts = parse_engine_log(log.read_text(), SGLANG)
    assert (facts.max_total_tokens, facts.kv_tokens, facts.weights_gib) == (20_480, 20_480, 15.11)
    outcome = bench.evaluate(log, json.loads(log.with_suffix(".json").read_text()))
    assert outcome.predicted_tokens == outcome.from_lines == outcome.logged_tokens == 20_480
    uncapped = int((63.70 - 78.81 * (1 - 0.88)) * 2**30 // 131_072)
    assert uncapped == 444_357


@pytest.mark.parametrize("log, meta", [
    pytest.param(log, meta, id=log.stem, marks=[pytest.mark.xfail(strict=True, reason=meta["miss"])]
                 if meta.get("miss") else []) for log, meta in bench.cases()])
def test_each_log_reconciles_within_10_percent(log, meta):
    assert log.read_text().startswith("# SOURCE:")
    assert meta["source_url"].startswith("https://")
    assert (FIXTURES / "configs" / meta["config"] / "config.json").is_file()
    error = bench.evaluate(log, meta).error
    assert error is not None and abs(error) <= 0.10, f"{error:+.1%}"


def test_reconcile_reads_an_sglang_log_and_exits_by_the_5_percent_rule():
    log = FIXTURES / "sglang_logs" / "sglang_llama31_8b_h100_pr4760.log"
    result = CliRunner().invoke(app, ["reconcile", str(log), "--engine", "sglang", "--model",
                                      str(FIXTURES / "configs" /
                                          "meta-llama--Llama-3.1-8B-Instruct"),
                                      "--device", "h100-80gb", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    rows = {row["key"]: row for row in report["rows"]}
    assert rows["kv_cache_tokens"]["logged"] == 442_750 and report["engine_version"] == "sglang"


def test_trtllms_engine_flow_allocations_before_the_pool_are_read_in_binary_units():
    """The C++ flow prints its runtime buffers and decoder through MemoryCounters::
    bytesToString, which divides by 1024 per unit (cpp/tensorrt_llm/runtime/
    memoryCounters.cpp): '2.66 GB' is 2.66 GiB, and the '43.29 MB' of TensorRT-LLM's memory
    doc's example is 43.29 MiB."""
    facts = parse_engine_log((FIXTURES / "trtllm_logs" /
                              "trtllm_qwen25_coder_05b_int8_a4000_issue1188.log").read_text(),
                             TRTLLM)
    assert (facts.engine_mib, facts.context_mib) == (875, 773.51)
    assert (facts.runtime_buffers_gib, facts.decoder_gib) == (2.66, 5.76)
    doc = ("[TensorRT-LLM][INFO] [MemUsageChange] Allocated 43.29 MB GPU memory for runtime "
           "buffers.\n[TensorRT-LLM][INFO] [MemUsageChange] Allocated 180.30 MB GPU memory for "
           "decoder.\n[TensorRT-LLM][INFO] [MemUsageChange] Allocated 63.44 GiB for max tokens "
           "in paged KV cache (259840).")
    facts = parse_engine_log(doc, TRTLLM)
    assert facts.runtime_buffers_gib == pytest.approx(43.29 / 1024, abs=1e-6)
    assert facts.decoder_gib == pytest.approx(180.30 / 1024, abs=1e-6)


def test_trtllms_engine_flow_pool_is_planned_from_its_logged_allocations():
    """No 'available' line: the pool is fraction 0.9 x (the device less the engine, execution
    context, runtime buffers and decoder the log prints, and the plan's non-torch line), and
    the row says which figures came from the log and which from the plan. On the 15.61 GiB
    CUDA reports for an RTX A4000 16 GB: 409,344 against the 395,776 the A4000 allocated,
    +3.4 %, the CUDA context not printed (against +186.4 % for the plan alone); on the 16 GiB
    of the product name +11.2 %, outside the 10 %."""
    log, meta = next((log, meta) for log, meta in bench.cases() if "issue1188" in log.name)
    assert meta["device"] == "15.61GiB"
    outcome = bench.evaluate(log, meta)
    assert outcome.from_lines == 409_344 and outcome.logged_tokens == 395_776
    assert outcome.error == pytest.approx(0.034, abs=0.001)
    assert outcome.plan_error == pytest.approx(1.864, abs=0.001)
    nominal = bench.evaluate(log, {**meta, "device": "16GiB"})
    assert nominal.from_lines == 440_000 and nominal.error > 0.10
    result = CliRunner().invoke(app, ["reconcile", str(log), "--engine", "trtllm", "--model",
                                      str(FIXTURES / "configs" / meta["config"]), "--device",
                                      meta["device"], "--weight-dtype", "int8", "--json"])
    assert result.exit_code == 0, result.output  # within reconcile's 5 %
    row = next(r for r in json.loads(result.stdout)["rows"] if r["key"] ==
               "kv_tokens_from_lines")
    assert "from the log: engine 0.85, execution context 0.76, runtime buffers 2.66, " \
        "decoder 5.76; from the plan: non-torch and collectives 0.38" in row["advice"]


def test_trtllms_pytorch_flow_pool_is_planned_from_its_profile_lines():
    """fraction x (total - profiled peak + the estimation pass's cache), each logged
    (_util.py): 0.9 x (119.70 - 113.65 + 0.56) GiB // 73,728 B in blocks of 32 = 86,624
    against 86,720 on the DGX Spark, whose unified memory the plan alone cannot see (+773 %)."""
    outcome = bench.evaluate(*next((log, meta) for log, meta in bench.cases()
                                   if "jeansblog" in log.name))
    assert outcome.from_lines == 86_624 and outcome.logged_tokens == 86_720
    assert abs(outcome.error) < 0.01 < 7 < outcome.plan_error


def test_trtllms_estimated_kv_memory_line_is_its_budget():
    """A log that elides the profile still prints KvCacheCreator's budget once more, after its
    caps ('Estimated max memory in KV cache', _util.py configure_kv_cache_capacity): 5.95 GiB
    on the GB10, as its 'available KV cache memory' says, and 9.06 GiB on the RTX 4070 SUPER
    under WSL2, which // 23,040 B a token in blocks of 32 gives 422,208 against the 422,048
    allocated, where the plan alone (the desktop's share of the card unseen) is +11.9 %."""
    gb10 = parse_engine_log("[TRT-LLM] [I] Estimated max memory in KV cache : 5.95 GiB\n"
                            "[TensorRT-LLM][INFO] [MemUsageChange] Allocated 5.95 GiB for max "
                            "tokens in paged KV cache (86720).", TRTLLM)
    assert gb10.available_kv_gib == 5.95
    log, meta = next((log, meta) for log, meta in bench.cases() if "rtx4070s" in log.name)
    assert parse_engine_log(log.read_text(), TRTLLM).available_kv_gib == 9.06
    outcome = bench.evaluate(log, meta)
    assert int(9.06 * 2**30 // 23_040) // 32 * 32 == outcome.from_lines == 422_208
    assert abs(outcome.error) < 0.001 and outcome.plan_error > 0.10


def test_reconcile_agrees_on_the_logged_free_memory():
    """The RTX 3090 under WSL2 had 22.76 GiB free as SGLang's weights began to load, 0.44 less
    than the plan's: the plan alone is +10.6 %, the pool planned from the logged free memory
    +0.1 %, and reconcile's verdict (exit 0) is on that."""
    log = FIXTURES / "sglang_logs" / "sglang_r1_distill_qwen7b_3090_mydeepseekr1.log"
    meta = json.loads(log.with_suffix(".json").read_text())
    result = CliRunner().invoke(app, ["reconcile", str(log), "--engine", "sglang", "--model",
                                      str(FIXTURES / "configs" / meta["config"]), "--device",
                                      meta["device"], "--json"])
    assert result.exit_code == 0, result.output
    rows = {row["key"]: row for row in json.loads(result.stdout)["rows"]}
    assert rows["kv_cache_tokens"]["predicted"] > 1.1 * rows["kv_cache_tokens"]["logged"]
    assert rows["kv_tokens_from_lines"]["predicted"] == 105_584


@given(st.integers(min_value=1, max_value=2**40))
def test_memory_counters_units_read_back_within_their_rounding(num_bytes):
    """Any allocation printed as MemoryCounters::bytesToString prints it (divide by 1024 while
    at least 1024, two decimals, B/KB/MB/GB/TB) reads back as GiB within half the last digit."""
    value, unit = float(num_bytes), 0
    while value >= 1024 and unit < 4:
        value, unit = value / 1024, unit + 1
    line = (f"[TensorRT-LLM][INFO] [MemUsageChange] Allocated {value:.2f} "
            f"{('B', 'KB', 'MB', 'GB', 'TB')[unit]} GPU memory for decoder.\n"
            "Allocated 1.00 GiB for max tokens in paged KV cache (8192).")
    read = parse_engine_log(line, TRTLLM).decoder_gib
    assert abs(read * 2**30 - num_bytes) <= 0.005 * 1024**unit + 2**30 * 1e-6


def test_the_held_out_logs_have_their_own_line():
    """Logs a sidecar marks `held_out` (added after every rule and constant) are counted apart,
    per engine, on the summary's last line."""
    cases = bench.cases()
    line = bench.summary([bench.evaluate(log, meta) for log, meta in cases])[-1]
    counts = {engine: sum(meta["engine"] == engine and bool(meta.get("held_out"))
                          for _, meta in cases) for engine in ("sglang", "trtllm")}
    assert line.startswith("held out (fitted on by none): ")
    assert all(n >= 1 for n in counts.values())
    assert all(f"{engine} {n} logs" in line for engine, n in counts.items())
