"""The device catalog: usable bytes as CUDA reports them, beside the capacity in the vendor's
product name (a label: boards carry about that many GiB, not that many 10^9 B)."""

import pytest

from servecap.ledger.devices import DEVICES, find, resolve_device
from servecap.ledger.errors import SpecError
from servecap.ledger.units import GB, GiB


def test_every_listed_device_is_there():
    names = {d.name for d in DEVICES}
    assert {"a100-40gb", "a100-80gb", "h100-80gb", "h200-141gb", "l4-24gb", "l40s-48gb",
            "mi300x-192gb"} <= names


@pytest.mark.parametrize("device", DEVICES, ids=lambda d: d.name)
def test_usable_is_apart_from_the_nominal_capacity_and_sourced(device):
    """The vendor's '80GB' is a label: neither 80 GiB usable nor a count of 10^9 B. GPU memory
    comes in binary sizes (HBM stacks and GDDR chips of 2^k Gbit), so what CUDA reports never
    exceeds the nominal figure in GiB, and is within 10 % below it (ECC and driver reserves)."""
    assert device.usable_bytes < device.nominal_gb * GiB
    assert device.usable_bytes > 0.9 * device.nominal_gb * GiB
    assert device.source and "usable" in device.source


def test_an_80gb_card_reports_about_79_2_gib():
    """vLLM logs print total_gpu_memory 79.1-79.3 GiB for 80 GB cards, which is more than
    80 x 10^9 B: the H100's 80GB is 5 HBM3 stacks of 16 GiB (glennklockwood.com/garden/
    processors/h100: '80 GB HBM3 (5 stacks)'), so the catalog listed 'GB = 10^9 B as sold'
    smaller than the bytes CUDA reports."""
    for name in ("a100-80gb", "h100-80gb"):
        assert 79.1 < find(name).usable_bytes / GiB < 79.3
        assert find(name).nominal_gb == 80
        assert find(name).usable_bytes > 80 * GB


def test_unknown_figures_stay_unknown():
    assert find("a10g-24gb").bf16_flops_per_s is None


def test_resolve_by_name_or_size():
    assert resolve_device("H100-80GB")[0] == find("h100-80gb").usable_bytes
    assert resolve_device("40GiB")[0] == 40 * GiB


@pytest.mark.parametrize(("text", "hint"), [
    ("h100", "did you mean h100-80gb or h100-pcie-80gb or h100-nvl-94gb?"),
    ("a100", "did you mean a100-40gb or a100-80gb or a100-pcie-40gb or a100-pcie-80gb?"),
    ("h2", "h200-141gb or h20-96gb?"),
    ("RTX 4090", "did you mean rtx-4090-24gb?"), ("80G", "did you mean 80GiB (2^30) or 80GB"),
])
def test_a_mistyped_device_points_to_what_was_meant(text, hint):
    with pytest.raises(SpecError) as err:
        resolve_device(text, "--device")
    assert hint in str(err.value) and "catalog name" in str(err.value)


@pytest.mark.parametrize(("text", "name"), [("h200", "h200-141gb"), ("H20", "h20-96gb"),
                                            ("l4", "l4-24gb"), ("rtx-4090", "rtx-4090-24gb")])
def test_the_one_name_a_prefix_begins_is_that_device(text, name):
    """As search's --devices: 'h200' is h200-141gb wherever a device is read."""
    assert resolve_device(text) == resolve_device(name)
    assert find(text).name == name


def test_an_unrelated_device_gets_no_guess():
    with pytest.raises(SpecError) as err:
        resolve_device("foo", "--device")
    assert "did you mean" not in str(err.value)


@pytest.mark.parametrize(("text", "needle"), [
    ("40", "40 bytes is not a device; give a unit: 40GiB or 40GB"),
    ("4090", "4090GiB or 4090GB (or the catalog's rtx-4090-24gb?)"),
])
def test_a_unitless_count_too_small_for_any_device_asks_for_the_unit(text, needle):
    with pytest.raises(SpecError) as err:
        resolve_device(text, "--device")
    assert needle in str(err.value)
    assert resolve_device(str(2**20))[0] == 2**20  # 1 MiB and up stay plain byte counts


def test_every_catalog_device_states_its_rates_interconnect_and_source():
    """The catalog the time model prices collectives and fp8 GEMMs from: a link and a latency
    on every device, fp8 never slower than bf16, a source for each."""
    for device in DEVICES:
        assert device.interconnect_bytes_per_s > 0 and 0 < device.interconnect_latency_s < 1e-4
        assert device.source and device.usable_bytes > 0
        if device.fp8_flops_per_s and device.bf16_flops_per_s:
            assert device.fp8_flops_per_s >= device.bf16_flops_per_s
    assert find("h100-80gb").flops_per_s("fp8") == 1_978_900 * 10**9  # vs 989.4 TFLOPS bf16
    assert find("a100-80gb").flops_per_s("fp8") == find("a100-80gb").bf16_flops_per_s
    assert find("b200-180gb").flops_per_s("fp4") == 9_000 * 10**12
    assert find("h100-80gb").flops_per_s("int4") == find("h100-80gb").bf16_flops_per_s
