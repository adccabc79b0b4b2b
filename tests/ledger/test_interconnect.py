"""How tensor-parallel peers are linked (--interconnect, --nnodes, the catalog's parts) and the
collective buffers vLLM's profile counts for each link."""

import pytest
from typer.testing import CliRunner

from servecap.cli.app import app
from servecap.ledger.devices import NODES, NVLINK, PCIE, find, tp_link
from servecap.ledger.errors import SpecError
from servecap.ledger.units import MiB
from servecap.ledger.vllm_profile import COMM_PER_GPU, COMM_PER_GPU_NVLINK, comm_estimate

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


def test_pcie_parts_of_nvlink_gpus_are_in_the_catalog():
    for name in ("a100-pcie-40gb", "a100-pcie-80gb", "h100-pcie-80gb"):
        assert find(name) is not None and find(name).interconnect.startswith("PCIe"), name


def _comm_line(*args):
    result = runner.invoke(app, ["plan", "llama-3.1-70b-instruct", "--context", "8192",
                                 "--engine", "vllm==0.19", "-tp", "2", *args, "--json"])
    assert result.exit_code in (0, 1), result.output
    import json
    return next(line for line in json.loads(result.stdout)["lines"]
                if line["key"] == "comm_buffers")


def test_plan_takes_the_interconnect_and_the_nodes():
    assert _comm_line("--device", "a100-80gb")["bytes"] == COMM_PER_GPU_NVLINK
    assert _comm_line("--device", "a100-80gb", "--interconnect", "pcie")["bytes"] == COMM_PER_GPU
    assert _comm_line("--device", "a100-pcie-80gb")["bytes"] == COMM_PER_GPU
    assert _comm_line("--device", "a100-80gb", "--nnodes", "2")["bytes"] == COMM_PER_GPU


@pytest.mark.parametrize("args, message", [
    (["--interconnect", "pci"], "--interconnect = 'pci': pcie or nvlink"),
    (["--nnodes", "3"], "--nnodes = 3: a divisor of tp x pp = 2"),
])
def test_bad_links_are_refused_by_name(args, message):
    result = runner.invoke(app, ["plan", "llama-3.1-70b-instruct", "--device", "a100-80gb",
                                 "-tp", "2", "--engine", "vllm", *args])
    assert result.exit_code == 2 and message in result.stderr
