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
