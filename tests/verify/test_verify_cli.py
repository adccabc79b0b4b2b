"""`servecap verify` on the CPU: the ledger's exact lines, the ceiling and the JSON contract."""

import json

import pytest
import torch
from typer.testing import CliRunner

from servecap.cli.app import app

MiB = 2**20
BLOCK_BYTES = 512 * 16  # tiny-llama fp32: 512 B/token, 16-token blocks
LINES = ["weights", "weight_metadata", "runtime_peak", "kv_pool", "kv_cache", "safety",
         "non_torch", "allocator_slack"]


def _invoke(*args: str):
    return CliRunner().invoke(app, ["verify", "tiny-llama", "--device", "cpu", *args])


def _json(*args: str) -> tuple[int, dict]:
    result = _invoke("--json", *args)
    return result.exit_code, json.loads(result.stdout)


@pytest.fixture(scope="module")
def default_run() -> dict:
    code, out = _json()
    assert code == 0, out["violations"]
    return out


def _line(out: dict, name: str) -> dict:
    return next(item for item in out["lines"] if item["line"] == name)


def test_weights_and_kv_pool_match_the_ledger_to_the_byte(default_run) -> None:
    plan = json.loads(CliRunner().invoke(app, ["plan", "tiny-llama", "--json"]).stdout)
    weights = _line(default_run, "weights")
    assert weights["measured_bytes"] == weights["predicted_bytes"] == plan["weights_bytes"]
    assert plan["weights_bytes"] == 106_816 * 4  # counted parameters x fp32
    pool = _line(default_run, "kv_pool")
    free_for_kv = 16 * MiB - (plan["committed_bytes"] - plan["kv_bytes_total"])
    assert pool["measured_bytes"] == (free_for_kv // BLOCK_BYTES + 1) * BLOCK_BYTES
    assert pool["residual_bytes"] == 0 and pool["verdict"] == "ok"


def test_measured_ceiling_equals_the_ledger_on_the_emulated_device(default_run) -> None:
    assert default_run["predicted_ceiling_requests"] == 15
    assert default_run["measured_ceiling_requests"] == 15
    code, smaller = _json("--device-memory", "15MiB")
    assert code == 0, smaller["violations"]
    assert smaller["predicted_ceiling_requests"] == smaller["measured_ceiling_requests"] == 8


def test_kv_in_use_and_runtime_peak_are_measured(default_run) -> None:
    kv = _line(default_run, "kv_cache")
    assert kv["predicted_bytes"] == 4 * 256 * 512
    assert kv["predicted_bytes"] - 4 * BLOCK_BYTES <= kv["measured_bytes"] <= \
        kv["predicted_bytes"]
    peak = _line(default_run, "runtime_peak")
    assert 0 < peak["measured_bytes"] <= peak["predicted_bytes"] == 12 * MiB


def test_the_headroom_is_the_lowest_of_the_run(default_run) -> None:
    """docs/verify.md: safety is device - everything charged at the peak, and the peak phase
    holds the ceiling probe (15 requests resident) as well as the declared load (4). It read
    12.04 MiB, 16 MiB less the declared load's 1.55 MiB, beside a phase peak of 8.23 MiB."""
    safety = _line(default_run, "safety")
    peak = next(p for p in default_run["phases"] if p["phase"] == "peak")
    declared = _line(default_run, "runtime_peak")["measured_bytes"]
    resident = next(p for p in default_run["phases"] if p["phase"] == "kv_pool")
    assert safety["measured_bytes"] == 16 * MiB - peak["peak_tensor_bytes"]
    assert safety["measured_bytes"] < 16 * MiB - resident["tensor_bytes"] - declared


def test_a_load_above_the_ceiling_queues_and_completes_every_request() -> None:
    result = _invoke("--json", "--concurrency", "20", "--output-tokens", "4")
    out = json.loads(result.stdout)
    assert result.exit_code == 1
    assert out["violations"] == ["kv_cache"]  # 20 x 256 tokens were declared; 15 fit
    assert "violated: kv_cache" in result.stderr
    latency = out["latency"]
    assert latency["num_finished"] == latency["num_requests"] == 20
    assert max(r["queue_ms"] for r in latency["requests"]) > 0
    kv = _line(out, "kv_cache")
    assert kv["measured_bytes"] <= 15 * 256 * 512


def test_optimistic_admission_preempts_and_still_completes_every_request() -> None:
    result = _invoke("--json", "--concurrency", "20", "--admission", "optimistic")
    out = json.loads(result.stdout)
    latency = out["latency"]
    assert latency["num_finished"] == latency["num_requests"] == 20
    assert latency["num_preemptions"] > 0
    assert out["violations"] == ["kv_cache"]
    assert out["measured_ceiling_requests"] == out["predicted_ceiling_requests"] == 15


def test_json_contract_is_stable(default_run) -> None:
    assert list(default_run)[:5] == ["lines", "predicted_ceiling_requests",
                                     "measured_ceiling_requests", "phases", "record"]
    assert [item["line"] for item in default_run["lines"]] == LINES
    for item in default_run["lines"]:
        assert {"line", "predicted_bytes", "measured_bytes", "residual_bytes",
                "verdict"} <= set(item)
        assert item["residual_bytes"] == item["measured_bytes"] - item["predicted_bytes"]
    assert [p["phase"] for p in default_run["phases"]] == [
        "baseline", "weights", "kv_pool", "warmup", "peak", "release"]
    record = default_run["record"]
    for key in ("torch_version", "cuda_version", "driver_version", "device_name", "topology",
                "model", "config_hash", "workload", "seed"):
        assert key in record
    assert record["config_hash"].startswith("sha256:")
    for key in ("ttft_ms", "itl_ms", "queue_ms", "e2e_ms"):
        assert set(default_run["latency"][key]) == {"p50", "p95", "p99", "mean"}
    assert default_run["latency"]["output_tokens_per_s"] > 0


def test_scaled_down_copy_is_planned_the_same_way() -> None:
    code, out = _json("--num-layers", "1", "--device-memory", "14MiB", "--output-tokens", "2")
    assert code == 0, out["violations"]
    weights = _line(out, "weights")
    # one layer less: 2 x 36,992 -> 1 x 36,992 parameters in the stack, fp32
    assert weights["measured_bytes"] == weights["predicted_bytes"] == (106_816 - 36_992) * 4


def test_a_too_small_runtime_budget_is_named() -> None:
    result = _invoke("--runtime-peak", "1MiB", "--device-memory", "8MiB", "--output-tokens", "2")
    assert result.exit_code == 1
    assert "runtime_peak (measured" in result.stderr


def _one_line_exit_2(result, *needles: str) -> None:
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.output
    assert result.stdout == ""
    for needle in needles:
        assert needle in result.stderr


def test_bad_load_is_one_line_before_anything_runs(tmp_path) -> None:
    _one_line_exit_2(_invoke("--output-tokens", "0"), "--output-tokens = 0")
    workload = tmp_path / "zero.yaml"
    workload.write_text("name: zero\nseed: 1\nnum_requests: 2\n"
                        "arrivals: {kind: fixed, times_s: [0, 0]}\n"
                        "prompt_tokens: {kind: fixed, value: 0}\n"
                        "output_tokens: {kind: fixed, value: 4}\n")
    _one_line_exit_2(_invoke("--workload", str(workload)), "zero.yaml", "prompt_tokens")


@pytest.mark.parametrize("model,needle", [("deepseek-v3", "--weight-dtype bf16 runs this"),
                                          ("minimax-m2.5", "routes experts as")])
def test_an_architecture_the_runtime_cannot_build_is_one_line(model, needle) -> None:
    result = CliRunner().invoke(app, ["verify", model, "--device", "cpu",
                                      "--device-memory", "2GiB"])
    _one_line_exit_2(result, needle)


def test_a_checkpoint_without_config_json_is_one_line(tmp_path) -> None:
    from safetensors.torch import save_file

    save_file({"x": torch.zeros(1)}, str(tmp_path / "model.safetensors"))
    _one_line_exit_2(_invoke("--weights", str(tmp_path)), "no config.json")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA device")
def test_no_driver_is_one_line_not_a_traceback() -> None:
    result = CliRunner().invoke(app, ["verify", "tiny-llama", "--device", "cuda:0"])
    assert result.exit_code == 2
    assert "no NVIDIA driver found; use --device cpu" in result.stderr
    assert "Traceback" not in result.output


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_verify_on_cuda_matches_the_exact_lines() -> None:
    result = CliRunner().invoke(app, ["verify", "tiny-llama", "--device", "cuda:0",
                                      "--device-memory", "128MiB", "--runtime-peak", "80MiB",
                                      "--json"])
    out = json.loads(result.stdout)
    assert result.exit_code == 0, out["violations"]
    for name in ("weights", "kv_pool", "safety"):
        assert _line(out, name)["verdict"] == "ok"
    assert out["measured_ceiling_requests"] == out["predicted_ceiling_requests"]
    assert out["phases"][-1]["reserved_bytes"] is not None
    # the context is its own line, outside the emulated 128 MiB device
    assert _line(out, "cuda_context")["measured_bytes"] > 0
    assert out["record"]["allocator_settings"]


def test_xlsx_fills_the_verification_sheet(tmp_path) -> None:
    import openpyxl

    path = tmp_path / "verified.xlsx"
    result = _invoke("--output-tokens", "2", "--xlsx", str(path))
    assert result.exit_code == 0, result.stderr
    rows = list(openpyxl.load_workbook(path)["Verification"].iter_rows(values_only=True))
    assert rows[0] == ("line", "predicted_bytes", "measured_bytes", "residual_bytes", "verdict",
                       "tolerance_bytes", "line name", "tolerance")
    assert [r[0] for r in rows[1:10]] == [*LINES, "memory_ceiling_requests"]
    weights, ceiling = rows[1], rows[9]
    assert weights[1] == weights[2] == 106_816 * 4 and weights[3:5] == (0, "ok")
    assert weights[5:] == (None, "weights", "exact")  # the name and the rule, as verify prints them
    assert ceiling[1] == ceiling[2] == 15 and ceiling[4:5] == ("ok",) and ceiling[7] == "equal"
    record = {r[0]: r[1] for r in rows[11:] if r[0]}
    assert record["torch"] == torch.__version__ and "config hash" in record
    again = _invoke("--xlsx", str(path))
    assert again.exit_code == 2 and "--force" in again.stderr


def test_calibration_out_is_the_simulators_fit_and_simulate_reads_it(tmp_path) -> None:
    path = tmp_path / "coeffs.json"
    result = _invoke("--output-tokens", "8", "--calibration-out", str(path))
    assert result.exit_code == 0, result.stderr
    said = " ".join(result.stdout.split())  # the console wraps at its width
    assert "steps of the declared load and the calibration sweep" in said
    fit = json.loads(path.read_text())
    assert set(fit) == {"coefficients", "intervals", "underdetermined", "residual_cv",
                        "rms_residual_s", "num_samples", "num_outliers",
                        "num_compute_bound"}  # what sim.calibrate.fit_step_model returns
    for name, why in fit["underdetermined"].items():  # named with its reason, no interval
        assert why and name not in fit["intervals"]
    coef = fit["coefficients"]
    assert set(coef) == {"weights_bytes", "kv_bytes_per_token", "flops_per_token",
                         "bandwidth_bytes_per_s", "flops_per_s",
                         "attention_flops_per_token_pair", "attention_flops_per_s",
                         "step_overhead_s", "step_time_cv"}
    assert coef["weights_bytes"] == 106_816 * 4 and coef["kv_bytes_per_token"] == 512
    assert coef["flops_per_token"] == 2 * 106_816
    assert coef["bandwidth_bytes_per_s"] > 0 and coef["flops_per_s"] > 0
    assert coef["step_overhead_s"] >= 0 and fit["num_samples"] >= 3
    assert coef["step_time_cv"] == fit["residual_cv"]
    workload = tmp_path / "load.yaml"
    workload.write_text("name: load\nseed: 1\nnum_requests: 3\n"
                        "arrivals: {kind: fixed, times_s: [0, 0, 0]}\n"
                        "prompt_tokens: {kind: fixed, value: 40}\n"
                        "output_tokens: {kind: fixed, value: 4}\n")
    # the flags' placeholder rates are replaced by every rate the file holds
    sim = CliRunner().invoke(app, ["simulate", "tiny-llama", "--device", "16MiB", "--bandwidth",
                                   "1GB/s", "--flops", "1TFLOPS", "--coefficients", str(path),
                                   "--workload", str(workload), "--json"])
    assert sim.exit_code == 0, sim.output
    used = json.loads(sim.stdout)["coefficients"]
    assert used["source"] == f"measured: {path}"
    assert {k: used[k] for k in coef} == pytest.approx(coef)


def test_the_simulator_replays_the_same_load() -> None:
    pytest.importorskip("servecap.sim.run")
    code, out = _json("--output-tokens", "8")
    assert code == 0, out["violations"]
    check = out["latency"]["simulated_vs_measured"]
    assert check["policy"] == "chunked-prefill"
    if check["verdict"] == "underdetermined":  # the fit could not pin a rate: no prediction
        assert check["underdetermined"] == out["calibration"]["underdetermined"] != {}
        assert not any(key in check for key in ("queue_ms", "ttft_ms", "itl_ms", "e2e_ms"))
        return
    for key in ("queue_ms", "ttft_ms", "itl_ms", "e2e_ms"):
        assert check[key]["measured"] == {k: out["latency"][key][k] for k in ("p50", "p95")}
        assert check[key]["simulated"]["p50"] >= 0


def test_the_loads_counts_print_on_a_line_not_in_a_wrapped_title() -> None:
    """The latency table's title held the counts and throughputs and, wrapped to the narrow
    table's width at 80 columns, broke mid-phrase over three lines."""
    result = CliRunner().invoke(app, ["verify", "tiny-llama", "--device", "cpu"],
                                terminal_width=80)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("the load: "))
    counts, throughput = lines[at], lines[at + 1]
    assert counts.endswith(" requests finished"), counts
    # the throughputs on their own line, whole
    assert throughput.startswith("throughput: input ") and throughput.endswith(" tokens/s")
    assert len(throughput) <= 80 and len(counts) <= 80
    assert "the load: ms from each request's arrival" in lines
