"""The sweep table explains its marks, and the TPOT target is named as such."""

import json
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
