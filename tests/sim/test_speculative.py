"""Speculative decoding: the expected-tokens formula and where the roofline says it pays."""

import pytest
from servecap.ledger.errors import SpecError
from servecap.sim.roofline import Coefficients
from servecap.sim.speculative import (
    Speculation,
    break_even_batch,
    compare,
    expected_tokens_per_step,
)


@pytest.mark.parametrize("k, a, expected", [(4, 0.0, 1.0), (4, 1.0, 5.0), (1, 0.5, 1.5),
                                            (4, 0.7, (1 - 0.7**5) / 0.3)])
def test_expected_tokens_per_step(k, a, expected):
    assert expected_tokens_per_step(k, a) == pytest.approx(expected)


def test_helps_at_low_batch_and_stops_at_high_batch(teaching):
    draft = Coefficients(weights_bytes=1_000_000_000, kv_bytes_per_token=16_384,
                         flops_per_token=2_000_000_000, bandwidth_bytes_per_s=2e12,
                         flops_per_s=990e12, step_overhead_s=0.001)
    spec = Speculation(4, 0.7, draft)
    rows = compare(teaching, spec, [1, 4, 16, 64, 256, 1024], context_tokens=128)
    assert rows[0]["speedup"] > 1.5
    assert rows[-1]["speedup"] < 1
    assert rows[3]["speedup"] > rows[4]["speedup"] > rows[5]["speedup"]
    assert break_even_batch(rows) == 1024


def test_no_acceptance_never_pays(teaching):
    rows = compare(teaching, Speculation(3, 0.0, teaching), [1, 8], 512)
    assert all(r["speedup"] < 1 for r in rows)


@pytest.mark.parametrize("k, a", [(0, 0.5), (4, 1.5), (4, -0.1)])
def test_bad_speculation(teaching, k, a):
    with pytest.raises(SpecError):
        Speculation(k, a, teaching)
