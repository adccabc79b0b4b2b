"""`servecap simulate` driven through the CLI with real files (sweep and speculate:
test_sweep_speculate_cli.py; cost: test_cost_cli.py)."""

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from servecap.cli.app import app
from servecap.cli.sim_view import tokens_per_s

ROOT = Path(__file__).resolve().parents[2]
CHAT = ROOT / "workloads" / "chat.yaml"
INLINE = ["--device", "80GiB", "--bandwidth", "2000GB/s", "--flops", "990TFLOPS"]
STAT_KEYS = {"p50", "p95", "p99", "mean"}


def _invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])



def test_json_contract_side_by_side(small_workload):
    # plain: the seed's decode bound is bandwidth / weight bytes on the bare roofline
    out = _invoke("simulate", "teaching-7b", *INLINE, "--workload", small_workload(),
                  "--policy", "static", "--policy", "continuous", "--policy",
                  "chunked-prefill", "--step-overhead", "0", "--engine", "plain", "--json")
    assert out.exit_code == 0, out.output
    report = json.loads(out.stdout)
    assert [p["policy"] for p in report["policies"]] == ["static", "continuous",
                                                         "chunked-prefill"]
    for entry in report["policies"]:
        for key in ("completed", "rejected", "queued", "preemptions", "input_tokens_per_s",
                    "output_tokens_per_s", "goodput_rps"):
            assert isinstance(entry[key], int | float)
        for key in ("queue_ms", "ttft_ms", "itl_ms", "tpot_ms", "e2e_ms"):
            assert set(entry[key]) == STAT_KEYS
        assert entry["completed"] + entry["rejected"] + entry["queued"] == 120
    assert report["coefficients"]["step_overhead_s"] == 0
    assert report["decode_bound_tokens_per_s"] == pytest.approx(142.857, abs=0.01)
    assert report["engine"] == {"simulated": "plain", "given": "plain", "default": False,
                                "about": report["engine"]["about"]}
    assert report["coefficients"]["cpu_step_s"] == report["coefficients"]["frontend_s"] == 0


def test_trace_and_records(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0,100,5\n0.01,2000,3\n0.5,10,1\n")
    records = tmp_path / "out.csv"
    out = _invoke("simulate", "llama-3.1-8b", "--device", "h100-80gb", "--trace", trace,
                  "--json", "--records", records, "--step-overhead", "2ms")
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["policies"][0]["completed"] == 3
    assert f"wrote {records}" in out.stderr  # stdout stays the one JSON object
    rows = list(csv.DictReader(records.open()))
    assert [int(r["output_tokens"]) for r in rows] == [5, 3, 1]
    assert all(r["state"] == "completed" and float(r["e2e_ms"]) > 0 for r in rows)
    assert float(rows[0]["first_token_s"]) >= float(rows[0]["prefill_start_s"])


def test_example_workload_reports_buckets_tail_and_kv():
    out = _invoke("simulate", "llama-3.1-8b", "--device", "h100-80gb", "--workload", CHAT,
                  "--json")
    entry = json.loads(out.stdout)["policies"][0]
    assert [b["prompt_tokens_max"] for b in entry["buckets"]] == [512, 2048, None]
    assert sum(b["completed"] for b in entry["buckets"]) == entry["completed"]
    assert entry["tail"]["tail"]["mean_prompt_tokens"] >= entry["tail"]["all"][
        "mean_prompt_tokens"]
    assert entry["kv"]["logical_tokens_per_slot"] > 1  # the shared system prompt


def test_example_workload_runs_with_a_table():
    out = _invoke("simulate", "llama-3.1-8b", "--device", "h100-80gb", "--workload", CHAT,
                  "--policy", "chunked-prefill", "--slo-ttft", "500ms", "--slo-itl", "50ms")
    assert out.exit_code == 0, out.output
    assert "chunked-prefill" in out.output and "decode bound" in out.output


@pytest.mark.parametrize("patch, needle", [
    ({"arrivals": {"kind": "poisson", "rate_per_s": -2}}, "arrivals.rate_per_s"),
    ({"prompt_tokens": {"kind": "empirical", "values": []}}, "prompt_tokens.values"),
])
def test_bad_workload_exits_2(patch, needle, small_workload):
    out = _invoke("simulate", "teaching-7b", *INLINE, "--workload",
                  small_workload(**patch))
    assert out.exit_code == 2
    assert needle in out.output and "w.yaml" in out.output
    assert "Traceback" not in out.output


def test_unknown_policy_and_missing_csv_columns_exit_2(tmp_path, small_workload):
    out = _invoke("simulate", "teaching-7b", *INLINE, "--workload",
                  small_workload(), "--policy", "round-robin")
    assert out.exit_code == 2 and "--policy = 'round-robin'" in out.output
    saved = tmp_path / "s.yaml"  # the same value from a scenario file: the file and its field
    assert _invoke("simulate", "teaching-7b", *INLINE, "--workload", small_workload(),
                   "--save-scenario", saved).exit_code == 0
    saved.write_text(saved.read_text().replace("  - chunked-prefill\n", "  - round-robin\n"))
    out = _invoke("simulate", "--scenario", saved)
    assert out.exit_code == 2 and f"{saved}: simulator.policies = 'round-robin'" in out.output
    trace = tmp_path / "bad.csv"
    trace.write_text("arrival_s,prompt_tokens\n0,10\n")
    out = _invoke("simulate", "teaching-7b", *INLINE, "--trace", trace)
    assert out.exit_code == 2 and "missing column(s) output_tokens" in out.output


def test_size_only_device_needs_rates(small_workload):
    out = _invoke("simulate", "teaching-7b", "--device", "80GiB", "--workload",
                  small_workload())
    assert out.exit_code == 2 and "--bandwidth" in out.output


def test_disaggregated_beside_colocated_with_records(tmp_path, small_workload):
    records = tmp_path / "r.csv"
    out = _invoke("simulate", "teaching-7b", *INLINE, "--workload", small_workload(),
                  "--disaggregate", "1:1", "--kv-transfer", "25GB/s", "--json",
                  "--records", records)
    assert out.exit_code == 0, out.output
    entries = json.loads(out.stdout)["policies"]
    assert [e["deployment"].split(",")[0] for e in entries] == ["colocated x2",
                                                                "disaggregated 1P+1D"]
    assert all(e["completed"] == 120 for e in entries)
    assert sum(r["requests"] for r in entries[0]["replicas"]) == 120
    rows = list(csv.DictReader(records.open()))
    assert len(rows) == 240 and {r["deployment"] for r in rows} == {e["deployment"]
                                                                     for e in entries}


@pytest.mark.parametrize("args, needle", [(["--disaggregate", "2"], "--disaggregate"),
                                          (["--router", "random"], "router"),
                                          (["--replicas", "0"], "replicas"),
                                          (["--replicas", "100000"], "at most 4,096")])
def test_bad_deployments_exit_2(args, needle, small_workload):
    out = _invoke("simulate", "teaching-7b", *INLINE, "--workload", small_workload(),
                  *args)
    assert out.exit_code == 2 and needle in out.output


def test_token_times_rebuild_every_token(tmp_path, small_workload):
    tokens, records = tmp_path / "tokens.csv", tmp_path / "records.csv"
    out = _invoke("simulate", "teaching-7b", *INLINE, "--workload", small_workload(),
                  "--replicas", "2", "--token-times", tokens, "--records", records, "--json")
    assert out.exit_code == 0, out.output
    rows = list(csv.DictReader(tokens.open()))
    per_request = {}
    for row in rows:
        per_request.setdefault(row["request_id"], []).append(float(row["ready_s"]))
    assert len(per_request) == 120
    assert all(times == sorted(times) for times in per_request.values())
    made = {r["request_id"]: int(r["output_tokens"]) for r in csv.DictReader(records.open())
            if r["state"] == "completed"}
    assert {k: len(v) for k, v in per_request.items()} == made


def test_measured_coefficients_replace_the_roofline(tmp_path, small_workload):
    measured = tmp_path / "coef.json"
    measured.write_text(json.dumps({"step_overhead_s": 0.003, "bandwidth_bytes_per_s": 1e12}))
    out = _invoke("simulate", "teaching-7b", *INLINE, "--workload", small_workload(),
                  "--coefficients", measured, "--json")
    assert out.exit_code == 0, out.output
    coef = json.loads(out.stdout)["coefficients"]
    assert coef["step_overhead_s"] == 0.003 and coef["bandwidth_bytes_per_s"] == 1e12
    assert coef["source"] == f"measured: {measured}"
    measured.write_text(json.dumps({"warp_factor": 9}))
    out = _invoke("simulate", "teaching-7b", *INLINE, "--workload", small_workload(),
                  "--coefficients", measured)
    assert out.exit_code == 2 and "warp_factor" in out.output and "coef.json" in out.output


def test_records_never_half_written(tmp_path, small_workload):
    target = tmp_path / "missing" / "out.csv"
    out = _invoke("simulate", "teaching-7b", *INLINE, "--workload", small_workload(),
                  "--records", target)
    assert out.exit_code == 2 and not target.exists()


def test_a_smaller_kv_pool_from_the_cli_preempts_more(small_workload):
    path = small_workload(arrivals={"kind": "poisson", "rate_per_s": 30},
                           output_tokens={"kind": "uniform", "low": 200, "high": 600})

    def preemptions(*extra):
        out = _invoke("simulate", "teaching-7b", *INLINE, "--workload", path, "--json", *extra)
        assert out.exit_code == 0, out.output
        return json.loads(out.stdout)["policies"][0]["preemptions"]
    assert preemptions() == 0 < preemptions("--num-gpu-blocks", "400")
    big_runtime = _invoke("simulate", "teaching-7b", *INLINE, "--workload", path, "--json",
                          "--runtime-peak", "40GiB")
    assert json.loads(big_runtime.stdout)["kv_pool"]["pool_bytes"] < 30 * 2**30
    out = _invoke("simulate", "teaching-7b", *INLINE, "--workload", path,
                  "--num-gpu-blocks", "10000000")
    assert out.exit_code == 2 and "--num-gpu-blocks" in out.output


def test_all_at_once_arrivals_give_strict_json(small_workload):
    path = small_workload(num_requests=5, arrivals={
        "kind": "bursts", "burst_size": 5, "interval_s": 1.0})
    out = _invoke("simulate", "teaching-7b", *INLINE, "--workload", path, "--json")
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["policies"][0]["offered_rps"] is None


def test_simulate_with_a_draft_model():
    args = ["simulate", "llama-3.1-8b", "--device", "h100-80gb", "--workload", CHAT, "--json"]
    plain = json.loads(_invoke(*args).stdout)["policies"][0]
    out = _invoke(*args, "--draft", "llama-3.2-1b-instruct", "--acceptance", "0.8")
    assert out.exit_code == 0, out.output
    report = json.loads(out.stdout)
    assert report["speculation"]["expected_tokens_per_step"] == pytest.approx(
        (1 - 0.8**5) / 0.2)
    assert report["policies"][0]["tpot_ms"]["mean"] < plain["tpot_ms"]["mean"]
    shown = _invoke(*args[:-1], "--draft", "llama-3.2-1b-instruct")
    assert "speculative decoding: k = 4" in shown.output


def test_a_report_feeds_back_as_a_coefficients_file(tmp_path, small_workload):
    args = ["simulate", "teaching-7b", *INLINE, "--workload", small_workload(),
            "--json"]
    first = json.loads(_invoke(*args, "--step-overhead", "3ms").stdout)
    saved = tmp_path / "report.json"
    saved.write_text(json.dumps(first))
    again = json.loads(_invoke(*args, "--coefficients", saved).stdout)
    assert again["coefficients"]["step_overhead_s"] == pytest.approx(0.003)
    assert again["policies"][0]["e2e_ms"] == first["policies"][0]["e2e_ms"]


def test_tenants_are_reported_apart(small_workload):
    path = small_workload(tenants=[{"name": "web", "share": 0.5, "priority": 0},
                                              {"name": "bulk", "share": 0.5, "priority": 1}])
    out = _invoke("simulate", "teaching-7b", *INLINE, "--workload", path, "--scheduling",
                  "priority", "--json")
    assert out.exit_code == 0, out.output
    rows = json.loads(out.stdout)["policies"][0]["tenants"]
    assert [r["tenant"] for r in rows] == ["bulk", "web"]
    assert sum(r["offered"] for r in rows) == 120


def test_the_saturation_rate_itself_is_not_a_capacity(small_workload):
    out = _invoke("sweep", "teaching-7b", *INLINE, "--workload", small_workload(),
                  "--num-rates", "4", "--json")
    assert out.exit_code == 0, out.output
    report = json.loads(out.stdout)
    last = report["points"][-1]
    assert last["rate_per_s"] == report["saturation_rps"] and not last["sustainable"]
    assert report["capacity_rps"] < report["saturation_rps"]


def test_a_latency_never_observed_is_null_not_zero(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0,100,1\n0.1,100,1\n"
                     "0.2,100000000,5\n")
    out = _invoke("simulate", "llama-3.1-8b", "--device", "h100-80gb", "--trace", trace,
                  "--speed-of-light", "--json")
    assert out.exit_code == 0, out.output
    entry = json.loads(out.stdout)["policies"][0]
    assert entry["completed"] == 2 and entry["rejected"] == 1
    assert entry["ttft_ms"]["p50"] > 0
    assert entry["itl_ms"] == entry["tpot_ms"] == dict.fromkeys(STAT_KEYS)  # one-token outputs
    text = _invoke("simulate", "llama-3.1-8b", "--device", "h100-80gb", "--trace", trace,
                   "--speed-of-light")
    row = next(line for line in text.output.splitlines() if "4.8 / 4.8" in line)
    assert text.exit_code == 0 and [c.strip() for c in row.split("│")][4:6] == ["-", "-"]


def test_a_request_longer_than_max_model_len_is_rejected_and_said(tmp_path):
    """A 5,000-token prompt under --max-model-len 4096 is refused, as vLLM's API refuses it
    (prompt + max_tokens > max_model_len: HTTP 400), and the reason is in --json and on
    screen; the model's own context (llama-3.1-8b: max_position_embeddings 131,072) is the
    limit when none is given, so a 200,000-token prompt is refused too."""
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0,5000,10\n0.1,100,10\n")
    long = tmp_path / "long.csv"
    long.write_text("arrival_s,prompt_tokens,output_tokens\n0,200000,10\n")
    base = ("simulate", "llama-3.1-8b", "--device", "h100-80gb")
    entry = json.loads(_invoke(*base, "--trace", trace, "--max-model-len", "4096",
                               "--json").stdout)["policies"][0]
    assert (entry["completed"], entry["rejected"]) == (1, 1)
    assert entry["rejection_reasons"] == [
        "longer than max_model_len 4,096 (prompt + output tokens)"]
    shown = _invoke(*base, "--trace", long)
    assert shown.exit_code == 0, shown.output
    assert "rejected: longer than max_model_len 131,072" in " ".join(shown.stdout.split())


@pytest.mark.parametrize("lengths, context", [(("200000", "10"), ()),
                                               (("4000", "97"), ("--max-model-len", "4096"))])
def test_a_fixed_shape_that_never_fits_max_model_len_is_one_line(lengths, context):
    out = _invoke("simulate", "llama-3.1-8b", "--device", "h100-80gb", "--input-len",
                  lengths[0], "--output-len", lengths[1], "--num-requests", "3", *context)
    assert out.exit_code == 2
    assert out.stderr.count("\n") == 1 and "--input-len/--output-len" in out.stderr
    limit = "4,096" if context else "131,072"
    assert f"at most max_model_len, {limit} tokens" in out.stderr


def test_a_fixed_shape_exactly_at_max_model_len_runs():
    out = _invoke("simulate", "llama-3.1-8b", "--device", "h100-80gb", "--input-len", "4000",
                  "--output-len", "96", "--num-requests", "3", "--max-model-len", "4096",
                  "--json")
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["policies"][0]["completed"] == 3


@pytest.mark.parametrize("value, shown", [(0.0, "0"), (0.34, "0.34"), (0.0034, "0.0034"),
                                          (0.999, "1.0"), (9.96, "10"), (86.56, "87"),
                                          (6849.2, "6,849")])
def test_a_small_token_rate_is_not_printed_as_zero(value, shown):
    assert tokens_per_s(value) == shown


def test_simulate_says_what_plan_says_of_a_context_vllm_refuses():
    """A --max-model-len beyond max_position_embeddings: plan notes that vLLM refuses it;
    simulate, on the same plan, says so too (in --json and on screen)."""
    args = ("simulate", "llama-3.1-8b", "--device", "h100-80gb", "--max-model-len", "200000",
            "--input-len", "1000", "--output-len", "10", "--num-requests", "20", "--rate", "2")
    out = json.loads(_invoke(*args, "--json").stdout)
    assert any("exceed max_position_embeddings 131,072" in n for n in out["plan_notes"])
    screen = _invoke(*args)
    assert screen.exit_code == 0, screen.output
    assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in " ".join(screen.stdout.split())
    plain = json.loads(_invoke(*args[:4], "--input-len", "1000",
                               "--output-len", "10", "--num-requests", "20", "--rate", "2",
                               "--json").stdout)
    assert not any("exceed max_position_embeddings" in n for n in plain["plan_notes"])


def test_the_interval_table_prints_whole_at_80_columns():
    """Two policies at 80 columns: the p50 and p99 cells kept each figure and its bounds on
    one line, so rich cut the run and metric names ('continuo…', 'metr…'); the bounds now
    wrap under their figure and no cell is cut."""
    out = CliRunner().invoke(app, ["simulate", "teaching-7b", *INLINE, "--workload",
                                   str(CHAT), "--policy", "static",
                                   "--policy", "continuous", "--slo-ttft", "500ms"],
                             terminal_width=80)
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if "95 % intervals" in line)
    table = lines[start:next(i for i in range(start, len(lines)) if lines[i].startswith("└"))]
    assert "…" not in "\n".join(table), "\n".join(table)
    assert any("continuous" in line for line in table) and "metric" in table[2]
    assert max(map(len, lines)) <= 80


def test_the_step_models_indented_lines_wrap_under_themselves(small_workload):
    """The step-model and engine lines under simulate's header are indented; wrapped at 80
    columns they went on at column 0 and read as lines of their own."""
    out = CliRunner().invoke(app, ["simulate", "teaching-7b", *INLINE, "--workload",
                                   str(small_workload())], terminal_width=80)
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    for start in ("  prefill", "  decode", "  host "):
        at = next(i for i, line in enumerate(lines) if line.startswith(start))
        assert lines[at + 1].startswith("    "), lines[at:at + 2]
