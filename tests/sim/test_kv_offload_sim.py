"""simulate with a host KV offload tier (--kv-offloading-size): a prefix group evicted from the
GPU pool but held in the tier loads back over the device's host link instead of being
prefilled again. Agent sessions revisiting 20 contexts of 6,000 tokens on an L4 (whose pool
holds ~34,000 tokens beside Llama-3.1-8B) are the case where it matters."""

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from servecap.cli.app import app
from servecap.ledger.devices import find, host_link
from servecap.sim.kvpool import HostTier
from servecap.sim.roofline import Coefficients, reload_s

AGENTS = Path(__file__).resolve().parents[1] / "fixtures" / "kv_offload" / "agents.yaml"
RUN = ["simulate", "llama-3.1-8b", "--device", "l4-24gb", "--engine", "vllm", "--context",
       "8192", "--workload", str(AGENTS), "--json"]


def _simulate(*extra):
    result = CliRunner().invoke(app, [*RUN, *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_the_tier_turns_evicted_prefixes_into_reloads():
    base, tier = _simulate(), _simulate("--kv-offloading-size", "32")
    b, t = base["policies"][0], tier["policies"][0]
    assert base["kv_offload"] is None and "offload_hit_tokens" not in b
    assert t["offload_hit_tokens"] > 0 and t["prefix_hit_rate"] > b["prefix_hit_rate"] + 0.5
    assert t["ttft_ms"]["p50"] < b["ttft_ms"]["p50"] / 2
    # the GPU pool is the same: the tier is host memory
    assert tier["kv_pool"]["num_blocks"] == base["kv_pool"]["num_blocks"]
    assert tier["kv_offload"]["tokens"] == 32 * 2**30 // (131_072 * 16) * 16
    # the L4's host link is its PCIe 4.0 x16, 32 GB/s a direction (ledger/devices.py)
    assert tier["kv_offload"]["reload_bytes_per_s"] == 32e9
    assert "vendor figure" in tier["kv_offload"]["reload_link"]


def test_a_tier_smaller_than_one_context_never_hits():
    """0.5 GiB holds 4,096 tokens: no 6,000-token context fits, so nothing reloads."""
    p = _simulate("--kv-offloading-size", "0.5")["policies"][0]
    assert p["offload_hit_tokens"] == 0


def test_reload_is_kv_bytes_over_the_host_link():
    coef = Coefficients(weights_bytes=1, kv_bytes_per_token=131_072, flops_per_token=1,
                        bandwidth_bytes_per_s=1e12, flops_per_s=1e15,
                        host_link_bytes_per_s=64e9)
    assert reload_s(coef, 6_000) == 131_072 * 6_000 / 64e9
    unknown = Coefficients(weights_bytes=1, kv_bytes_per_token=131_072, flops_per_token=1,
                           bandwidth_bytes_per_s=1e12, flops_per_s=1e15)
    assert reload_s(unknown, 6_000) == 131_072 * 6_000 / unknown.swap_bandwidth_bytes_per_s


def test_host_links_are_the_vendor_figures():
    assert host_link(find("h100-80gb")) == ("PCIe 5.0 x16", 64 * 10**9)
    assert host_link(find("gb200-186gb")) == ("NVLink-C2C", 450 * 10**9)
    assert host_link(find("l4-24gb")) == ("PCIe 4.0 x16", 32 * 10**9)
    assert host_link(find("b200-180gb")) is None  # no vendor figure held: the output says so


@given(st.lists(st.tuples(st.integers(0, 30), st.integers(1, 5_000)), max_size=200),
       st.integers(1, 20_000))
def test_the_tier_never_holds_more_than_its_tokens(stores, capacity):
    tier = HostTier(capacity)
    for key, tokens in stores:
        tier.store(("group", str(key)), tokens)
        assert tier.used == sum(tier.entries.values()) <= capacity


def test_bad_size_is_one_line():
    result = CliRunner().invoke(app, [*RUN, "--kv-offloading-size", "-1"])
    assert result.exit_code == 2 and "\n" not in result.stderr.strip()
    assert "--kv-offloading-size" in result.stderr
