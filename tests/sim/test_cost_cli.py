"""`servecap cost`: GPU count, input-token and reserved prices, and the SLO capacity."""

import json

import pytest
from typer.testing import CliRunner

from servecap.cli.app import app
from servecap.ledger.vllm_versions import NEWEST

INLINE = ["--device", "80GiB", "--bandwidth", "2000GB/s", "--flops", "990TFLOPS"]
SEED = ["cost", "--tokens-per-s", "1000", "--gpu-price", "2", "--utilization", "0.3"]


def _run(*args):
    return CliRunner().invoke(app, [str(a) for a in args], terminal_width=80)


def _json(*args):
    out = _run(*args, "--json")
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)



def test_seed_004_golden_arithmetic_and_the_gpu_count():
    one = _json(*SEED)
    assert one["num_gpus"] == 1 and one["priced_at"] == "given"
    assert one["usd_per_million_full_load"] == pytest.approx(0.56, abs=0.005)
    assert one["usd_per_million_at_utilization"] == pytest.approx(1.85, abs=0.005)
    # every GPU of -tp 2 x -pp 2 x 2 replicas is paid: 8 x $2/h for the same tokens
    eight = _json(*SEED, "-tp", "2", "-pp", "2", "--replicas", "2")
    assert eight["num_gpus"] == 8 and eight["deployment_usd_per_h"] == 16
    assert eight["gpu_price_per_h"] == 2
    assert eight["usd_per_million_full_load"] == pytest.approx(8 * 2 / 3.6)
    out = _run(*SEED, "-tp", "2").stdout
    assert "on 2 GPUs at $2/GPU-hour on demand: $4.00 per hour" in out
    assert "on 1 GPU at" in _run(*SEED).stdout


def test_input_tokens_priced_separately():
    report = _json(*SEED, "--api-price", "0.6", "--input-price", "0.15",
                   "--input-tokens-per-s", "3000")
    assert report["api_usd_per_h_full_load"] == pytest.approx(3.78)
    assert report["break_even_utilization"] == pytest.approx(2 / 3.78)
    assert report["api_input_price_per_million"] == 0.15
    out = _run(*SEED, "--input-price", "0.15", "--input-tokens-per-s", "3000")
    assert out.exit_code == 2 and "--input-price" in out.output
    assert _run(*SEED, "--api-price", "0.6", "--input-price", "0.15").exit_code == 2


def test_reserved_beside_on_demand():
    report = _json(*SEED, "--api-price", "0.6", "--reserved-price", "1.4")
    assert report["usd_per_million_full_load"] == pytest.approx(2 / 3.6)
    assert report["reserved_usd_per_million_full_load"] == pytest.approx(1.4 / 3.6)
    assert report["reserved_usd_per_million_at_utilization"] == pytest.approx(1.4 / 1.08)
    assert report["reserved_pays_above_utilization"] == pytest.approx(0.7)
    assert report["reserved_break_even_utilization"] == pytest.approx(1.4 / 3.6 / 0.6)
    assert "reserved at $1.4/GPU-hour: $0.39 per million" in _run(
        *SEED, "--reserved-price", "1.4").stdout


def test_priced_at_the_slo_capacity_that_sweep_finds(small_workload):
    work = small_workload()
    slo = ["--slo-ttft", "500ms", "--slo-tpot", "20ms"]
    sweep = _json("sweep", "teaching-7b", *INLINE, "--workload", work, *slo)
    saturation = _json("cost", "teaching-7b", *INLINE, "--workload", work)
    at_slo = _json("cost", "teaching-7b", *INLINE, "--workload", work, *slo)
    assert saturation["priced_at"] == "saturation" and at_slo["priced_at"] == "slo_capacity"
    assert at_slo["capacity_rps"] == sweep["capacity_rps"] > 0
    point = sweep["capacity_point"]  # the run at the bisected capacity
    assert point["rate_per_s"] == sweep["capacity_rps"] and point["meets_slo"]
    assert at_slo["output_tokens_per_s"] == point["output_tokens_per_s"]
    assert at_slo["input_tokens_per_s"] == point["input_tokens_per_s"]
    assert at_slo["output_tokens_per_s"] < saturation["output_tokens_per_s"]
    assert at_slo["usd_per_million_full_load"] > saturation["usd_per_million_full_load"]


def test_slo_pricing_needs_a_simulation_and_a_reachable_target(small_workload):
    out = _run(*SEED, "--slo-ttft", "500ms")
    assert out.exit_code == 2 and "--tokens-per-s" in out.output
    out = _run("cost", "teaching-7b", *INLINE, "--workload", small_workload(),
               "--slo-ttft", "1us")
    assert out.exit_code == 2 and "none was" in out.output


@pytest.mark.parametrize(("flag", "named"), [
    ("-tp", "--tensor-parallel-size"), ("--tensor-parallel-size", "--tensor-parallel-size"),
    ("-pp", "--pipeline-parallel-size"), ("--replicas", "--replicas")])
def test_a_zero_gpu_count_names_its_own_flag_not_the_price(flag, named):
    """-tp 0 made the deployment's price 0 x $5 and the error blamed '--gpu-price = 0.0'."""
    out = _run("cost", "--tokens-per-s", "1000", "--gpu-price", "5", flag, "0")
    assert out.exit_code == 2
    assert out.stderr.strip() == f"servecap: error: {named} = 0: a whole number >= 1"


def test_cost_command_reproduces_the_seed():
    out = _run("cost", "--tokens-per-s", "1000", "--gpu-price", "2.0", "--utilization",
                  "0.3", "--api-price", "0.6", "--json")
    assert out.exit_code == 0, out.output
    report = json.loads(out.stdout)
    assert report["usd_per_million_full_load"] == pytest.approx(0.556, abs=0.001)
    assert report["usd_per_million_at_utilization"] == pytest.approx(1.85, abs=0.01)
    assert report["break_even_utilization"] == pytest.approx(0.926, abs=0.001)


def test_cost_from_a_simulated_saturation(small_workload):
    out = _run("cost", "teaching-7b", *INLINE, "--workload", small_workload(),
                  "--json")
    assert out.exit_code == 0, out.output
    report = json.loads(out.stdout)
    assert report["output_tokens_per_s"] > 143  # batching beats the single-stream bound
    assert "simulated saturation" in report["tokens_source"]


def test_cost_names_the_release_its_tokens_were_simulated_with():
    """The default release's host and API-server time lower the saturation throughput below
    plain's; each run's tokens say which engine and scheduler made them."""
    shape = ("cost", "llama-3.1-8b", "--device", "h100-80gb", "--input-len", "256",
             "--output-len", "32", "--num-requests", "50", "--json")
    default, plain = (json.loads(_run(*shape, *extra).stdout) for extra in
                      ([], ["--engine", "plain"]))
    assert default["engine"]["simulated"] == NEWEST.pin and default["engine"]["default"]
    assert f"chunked-prefill, {NEWEST.pin} (the default)" in default["tokens_source"]
    assert plain["engine"]["simulated"] == "plain"
    assert "continuous, plain" in plain["tokens_source"]
    assert default["output_tokens_per_s"] < plain["output_tokens_per_s"]


@pytest.mark.parametrize("share", ["0.3", "0.05"])
def test_the_two_prices_print_in_one_column_with_one_unit(share):
    """'full load:' was padded for a two-digit share only, and the second price said 'per
    million' where the first said 'per million output tokens'."""
    lines = _run("cost", "--tokens-per-s", "1000", "--gpu-price", "2", "--utilization",
                 share).stdout.splitlines()
    full = next(line for line in lines if line.startswith("full load:"))
    at = next(line for line in lines if line.startswith("at ") and "utilization:" in line)
    assert full.index("$") == at.index("$"), (full, at)
    assert full.endswith("per million output tokens") and at.endswith(
        "per million output tokens")


def test_full_utilization_prints_its_price_once():
    """At --utilization 1 (the default) 'full load:' and 'at 100% utilization:' were the same
    price on two lines."""
    lines = _run("cost", "--tokens-per-s", "1000", "--gpu-price", "2").stdout.splitlines()
    prices = [line for line in lines if "per million output tokens" in line]
    assert prices == ["full load (100% utilization): $0.56 per million output tokens"]


def test_the_default_gpu_price_is_said_to_be_assumed(tmp_path):
    """--gpu-price's $2/GPU-hour stood in silently: the output read as if it were given."""
    out = _run("cost", "--tokens-per-s", "1000")
    assert "note: --gpu-price not given: $2/GPU-hour assumed" in out.stdout
    assert _json("cost", "--tokens-per-s", "1000")["gpu_price_source"] == "default"
    assert "not given" not in _run("cost", "--tokens-per-s", "1000", "--gpu-price", "2").stdout
    scenario = tmp_path / "prices.yaml"
    scenario.write_text("prices: {usd_per_gpu_hour: 4}\n")
    report = _json("cost", "--tokens-per-s", "1000", "--scenario", str(scenario))
    assert report["gpu_price_source"] == "given" and report["gpu_price_per_h"] == 4


def test_a_model_beside_a_measured_rate_is_refused_not_ignored() -> None:
    """cost MODEL --tokens-per-s priced the given rate and dropped MODEL without a word; one of
    the two has to go, and the message says which does what."""
    out = _run("cost", "llama-3.1-8b", "--tokens-per-s", "1000", "--gpu-price", "2")
    assert out.exit_code == 2
    assert "MODEL" in out.output and "llama-3.1-8b" in out.output
    assert "--tokens-per-s" in out.output and "Traceback" not in out.output
