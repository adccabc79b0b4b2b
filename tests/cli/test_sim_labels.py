"""The sweep table explains its marks, and the TPOT target is named as such."""

import json
import re
from pathlib import Path

import pytest

CHAT = (Path(__file__).resolve().parents[2] / "workloads" / "chat.yaml").read_text()


@pytest.fixture
def small(tmp_path) -> Path:
    path = tmp_path / "w.yaml"
    path.write_text(CHAT.replace("num_requests: 2000", "num_requests: 60"))
    return path


def _sweep(run, small, *extra):
    return run("sweep", "teaching-7b", "--device", "h100-80gb", "--workload", small,
               "--num-rates", "3", *extra)


@pytest.mark.parametrize("flag", ["--slo-tpot", "--slo-itl"])
def test_slo_tpot_is_the_flag_and_slo_itl_its_alias(run, small, flag) -> None:
    result = _sweep(run, small, flag, "50ms", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["slo"]["itl_s"] == pytest.approx(0.05)


def test_the_sweep_table_says_what_over_and_the_tpot_target_mean(run, small) -> None:
    text = " ".join(_sweep(run, small, "--slo-tpot", "50ms").stdout.split())
    assert "checked on each request's TPOT" in text
    assert "*: offered at or above the saturation rate" in text


def test_the_simulated_pool_says_whose_it_is(run, monkeypatch) -> None:
    """simulate runs --engine vllm by default but sizes its pool with the plain ledger (device -
    weights - runtime peak - safety), 28,502 blocks here where `plan --engine vllm` sizes vLLM's
    budget at 28,239: the header's 'KV pool 28,502 blocks' did not say which."""
    monkeypatch.setenv("COLUMNS", "200")
    result = run("simulate", "llama-3.1-8b", "--device", "h100-80gb", "--input-len", "100",
                 "--output-len", "10", "--num-requests", "50", "--context", "8192")
    assert result.exit_code == 0, result.output
    assert ("KV pool 28,502 blocks x 16 tokens (55.67 GiB, the ledger's: device - weights - "
            "runtime peak - safety)") in result.stdout


def test_the_fixed_step_cost_is_named_by_its_flag(run, monkeypatch) -> None:
    """The rates line said '0 ms per step' and the step model below 'overhead 0.509 ms' per
    step: two overheads, the first unnamed. It is --step-overhead's."""
    monkeypatch.setenv("COLUMNS", "200")
    result = run("simulate", "llama-3.1-8b", "--device", "h100-80gb", "--input-len", "100",
                 "--output-len", "10", "--num-requests", "50", "--context", "8192",
                 "--step-overhead", "2ms")
    assert result.exit_code == 0, result.output
    assert "3,350.0 GB/s, --step-overhead 2 ms; weights read" in result.stdout
    assert "ms per step" not in result.stdout


def test_engine_host_figures_group_their_thousands(run) -> None:
    """'host 2178 us/step + 54.25 us/sequence': every other figure on the page groups its
    thousands (28,502 blocks, 8,192 tokens)."""
    result = run("simulate", "llama-3.1-8b", "--device", "h100-80gb", "--input-len", "10",
                 "--output-len", "2", "--num-requests", "2")
    assert result.exit_code == 0, result.output
    host = re.search(r"host ([\d,.]+) us/step", result.stdout).group(1)
    assert float(host.replace(",", "")) >= 1000 and "," in host
