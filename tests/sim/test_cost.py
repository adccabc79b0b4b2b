"""Seed 004's self-host arithmetic: $2/h at 1,000 tokens/s."""

import pytest

from servecap.ledger.errors import SpecError
from servecap.sim.cost import break_even_utilization, cost_per_million


def test_seed_illustration():
    assert cost_per_million(2.0, 1000) == pytest.approx(0.556, abs=0.001)
    assert cost_per_million(2.0, 1000, 0.3) == pytest.approx(1.85, abs=0.01)


def test_break_even_utilization_against_an_api():
    share = break_even_utilization(2.0, 1000, 0.6)
    assert share == pytest.approx(0.926, abs=0.001)
    assert cost_per_million(2.0, 1000, share) == pytest.approx(0.6)


@pytest.mark.parametrize("args", [(0, 1000, 1), (2, 0, 1), (2, 1000, 0), (2, 1000, 1.5),
                                  (2, float("inf"), 1), (float("nan"), 1000, 1)])
def test_bad_inputs(args):
    with pytest.raises(SpecError):
        cost_per_million(*args)


def test_a_percentage_given_as_a_utilization_is_rewritten_as_a_share():
    with pytest.raises(SpecError, match=r"for 30% write 0\.3"):
        cost_per_million(2, 1000, 30)


def test_an_api_that_bills_input_tokens_moves_the_break_even():
    from servecap.sim.cost import api_usd_per_h

    # 1,000 output tok/s at $0.60/M and 3,000 input tok/s at $0.15/M: (600 + 450) x 3600 / 1e6
    assert api_usd_per_h(1000, 0.6, 3000, 0.15) == pytest.approx(3.78)
    assert break_even_utilization(2.0, 1000, 0.6, 3000, 0.15) == pytest.approx(2 / 3.78)
    assert break_even_utilization(2.0, 1000, 0.6, 3000, 0.0) == pytest.approx(0.926, abs=0.001)


def test_reserved_figures_use_the_same_arithmetic():
    from servecap.sim.cost import cost_report, reserved_report

    report = cost_report(2.0, 1000, 0.3, 0.6)
    reserved = reserved_report(1.0, report)
    assert reserved["reserved_usd_per_million_full_load"] == pytest.approx(0.556 / 2, abs=0.001)
    assert reserved["reserved_usd_per_million_at_utilization"] == pytest.approx(1.85 / 2,
                                                                                 abs=0.01)
    assert reserved["reserved_break_even_utilization"] == pytest.approx(0.926 / 2, abs=0.001)
    with pytest.raises(SpecError, match="--reserved-price"):
        reserved_report(0, report)
