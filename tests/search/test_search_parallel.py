"""The same ranking inline, on a process pool and on Ray; Ctrl-C keeps what finished."""

import pytest

from servecap.sim.search.execute import run_all
from servecap.sim.search.search import plan_batches, run_search


def _ranking(report: dict) -> list[tuple]:
    return [(r["label"], r["cost_usd_per_hour"], r["tokens_per_s_per_gpu"], r["slo_attainment"])
            for r in report["candidates"]]


@pytest.fixture(scope="module")
def inline(small_problem, small_axes, small_prices):
    return run_search(small_problem, small_axes, small_prices, "m", workers=1)


def test_process_pool_gives_the_same_ranking(inline, small_problem, small_axes,
                                             small_prices) -> None:
    pooled = run_search(small_problem, small_axes, small_prices, "m", workers=2)
    assert _ranking(pooled) == _ranking(inline)
    assert pooled["cheapest"] == inline["cheapest"]
    assert pooled["frontier"] == inline["frontier"]


def test_ray_local_gives_the_same_ranking(inline, small_problem, small_axes,
                                          small_prices) -> None:
    pytest.importorskip("ray", reason="Ray is the optional extra servecap[ray]")
    on_ray = run_search(small_problem, small_axes, small_prices, "m", workers=2, ray="local")
    assert _ranking(on_ray) == _ranking(inline)


@pytest.mark.parametrize("workers", [1, 2])
def test_ctrl_c_returns_what_finished(small_problem, small_axes, workers: int) -> None:
    batches, _ = plan_batches(small_problem, small_axes)
    seen = []

    def interrupt_after_two():
        seen.append(1)
        if len(seen) == 2:
            raise KeyboardInterrupt

    done, interrupted = run_all(small_problem, batches, workers, on_done=interrupt_after_two)
    assert interrupted
    assert len(done) == 2 < len(batches)
    assert all(d["rows"] for d in done.values())
