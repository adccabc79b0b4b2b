"""How tensor-parallel peers are linked (--interconnect, --nnodes, the catalog's parts) and the
collective buffers vLLM's profile counts for each link."""

import pytest
from typer.testing import CliRunner

from servecap.cli.app import app
from servecap.ledger.devices import NODES, NVLINK, PCIE, find, tp_link
from servecap.ledger.errors import SpecError
from servecap.ledger.units import MiB
from servecap.ledger.vllm_profile import COMM_PER_GPU, COMM_PER_GPU_NVLINK, comm_estimate
from servecap.ledger.vllm_versions import ROWS

runner = CliRunner()
H100 = "NVIDIA H100 80GB HBM3 (h100-80gb)"


def test_the_link_follows_the_catalog_unless_declared():
    assert tp_link(H100, None, 2)[0] == NVLINK
    assert tp_link("NVIDIA L40S (l40s-48gb)", None, 2)[0] == PCIE
    assert tp_link("44GiB", None, 2) == (PCIE, "a device outside the catalog (PCIe assumed; "
                                               "--interconnect to state it)")
    assert tp_link(H100, PCIE, 2) == (PCIE, "declared: --interconnect pcie")
    assert tp_link(H100, None, 1) == ("", "no tensor parallelism")


def test_a_tensor_parallel_group_across_nodes():
    assert tp_link(H100, None, 8, gpus_per_node=4)[0] == NODES  # tp 8 over two 4-GPU nodes
    assert tp_link(H100, None, 4, gpus_per_node=4)[0] == NVLINK  # pp 2 across the nodes
    with pytest.raises(SpecError, match="--interconnect"):
        tp_link(H100, "infiniband", 2)


def test_collective_buffers_by_link():
    assert comm_estimate(2, 1, NVLINK)[0] == COMM_PER_GPU_NVLINK == 1_856 * MiB
    for link in (PCIE, NODES, ""):
        assert comm_estimate(2, 1, link)[0] == COMM_PER_GPU == 128 * MiB
    assert comm_estimate(1, 1, NVLINK)[0] == 0


def test_communicators_built_before_the_baseline_leave_the_budget_without_nvlink():
    """From 0.11.0 vLLM builds its communicators before its memory snapshot: over PCIe, across
    nodes or between pipeline stages nothing is left inside the budget; NVLink keeps what the
    0.19 H100 logs profiled after that baseline."""
    for link in (PCIE, NODES, ""):
        size, how = comm_estimate(4, 1, link, before_baseline=True)
        assert size == 0 and "before its memory baseline" in how
    assert comm_estimate(4, 1, NVLINK, before_baseline=True)[0] == COMM_PER_GPU_NVLINK
    rows = {row.version: row.communicators_before_baseline for row in ROWS}
    assert rows[(0, 9, 2)] is False and rows[(0, 11, 0)] is True and rows[(0, 7, 1)] is False
    assert all(rows[v] for v in rows if v >= (0, 11, 0))


def test_pcie_parts_of_nvlink_gpus_are_in_the_catalog():
    for name in ("a100-pcie-40gb", "a100-pcie-80gb", "h100-pcie-80gb"):
        assert find(name) is not None and find(name).interconnect.startswith("PCIe"), name


def _comm_line(*args, engine="vllm==0.10.2"):
    result = runner.invoke(app, ["plan", "llama-3.1-70b-instruct", "--context", "8192",
                                 "--engine", engine, "-tp", "2", *args, "--json"])
    assert result.exit_code in (0, 1), result.output
    import json
    return next(line for line in json.loads(result.stdout)["lines"]
                if line["key"] == "comm_buffers")


def test_plan_takes_the_interconnect_and_the_nodes():
    assert _comm_line("--device", "a100-80gb")["bytes"] == COMM_PER_GPU_NVLINK
    assert _comm_line("--device", "a100-80gb", "--interconnect", "pcie")["bytes"] == COMM_PER_GPU
    assert _comm_line("--device", "a100-pcie-80gb")["bytes"] == COMM_PER_GPU
    assert _comm_line("--device", "a100-80gb", "--nnodes", "2")["bytes"] == COMM_PER_GPU
    for args in (("--device", "a100-80gb", "--interconnect", "pcie"),
                 ("--device", "l40s-48gb"), ("--device", "a100-80gb", "--nnodes", "2")):
        assert _comm_line(*args, engine="vllm==0.19")["bytes"] == 0, args
    assert _comm_line("--device", "a100-80gb", engine="vllm==0.19")["bytes"] == \
        COMM_PER_GPU_NVLINK


@pytest.mark.parametrize("args, message", [
    (["--interconnect", "pci"], "--interconnect = 'pci': pcie or nvlink"),
    (["--nnodes", "3"], "--nnodes = 3: a divisor of tp x pp = 2"),
])
def test_bad_links_are_refused_by_name(args, message):
    result = runner.invoke(app, ["plan", "llama-3.1-70b-instruct", "--device", "a100-80gb",
                                 "-tp", "2", "--engine", "vllm", *args])
    assert result.exit_code == 2 and message in result.stderr
