"""Every catalog device has an efficiency it can defend (sim/efficiency.py): a measured table,
or a derating rule printed as one; MoE kernels follow the simulated release where measured."""

import pytest

from servecap.ledger.devices import DEVICES
from servecap.sim.efficiency import DERATED, for_device, load_tables, moe_era


@pytest.mark.parametrize("device", [d.name for d in DEVICES])
def test_no_catalog_device_runs_at_peak_silently(device) -> None:
    eff = for_device(device)
    assert eff is not None, device
    assert eff.source.startswith(("measured:", "derated:")), eff.source
    assert 0 < eff.gemm_efficiency < 1 and 0 < eff.bandwidth_efficiency < 1
    assert eff.layer_overhead_s > 0
    measured = device in load_tables()["devices"]
    assert measured != (device in DERATED)  # one or the other, never both


def test_a_derated_device_names_its_rule_and_takes_its_neighbours_shares() -> None:
    tables = load_tables()["devices"]
    pcie, ada, a10 = for_device("h100-pcie-80gb"), for_device("rtx-4090-24gb"), \
        for_device("a10-24gb")
    assert "derated" in pcie.source and "h100-80gb" in pcie.source and "DERATED" in pcie.source
    assert pcie.gemm_efficiency == tables["h100-80gb"]["gemm_efficiency"]
    assert ada.bandwidth_efficiency == tables["l40s-48gb"]["bandwidth_efficiency"]
    # Ampere compute as the A100's, GDDR6 bandwidth as the L40S's
    assert a10.gemm_efficiency == tables["a100-80gb"]["gemm_efficiency"]
    assert a10.bandwidth_efficiency == tables["l40s-48gb"]["bandwidth_efficiency"]
    assert "no AMD kernels measured" in for_device("mi300x-192gb").source
    assert for_device("not-a-device") is None


def test_moe_kernels_follow_the_release_where_measured_and_say_so_where_not() -> None:
    h200 = load_tables()["devices"]["h200-141gb"]
    eras = {e["vllm"]: e["moe_gemm_efficiency"] for e in h200["moe_eras"]}
    assert set(eras) >= {"0.19.0", "0.24.0"} and eras["0.19.0"] != eras["0.24.0"]
    assert moe_era(h200, (0, 21, 0))[0] == eras["0.19.0"]
    assert moe_era(h200, (0, 30, 0))[0] == eras["0.24.0"]
    old = moe_era(h200, (0, 7, 3))
    assert old[0] == eras["0.19.0"] and "no measurement of vLLM 0.7.3's MoE kernels" in old[2]
    one = moe_era(load_tables()["devices"]["h100-80gb"], (0, 7, 3))[2]
    assert "no measurement of other releases' kernels" in one
    assert "0.7.3" in for_device("h200-141gb", (0, 7, 3)).source
