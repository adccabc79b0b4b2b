"""Intervals on screen: '±half' only where the interval is symmetric about its estimate, else
the bounds (a share at 100 % has a one-sided interval), and no attainment without an SLO."""

from servecap.cli.steady_view import half, pm, share_cell, window_line

WINDOW = {"steady_state": True, "warmup_requests": 0, "drain_requests": 0,
          "measured_requests": 10, "offered": 10, "window_lifetimes": 3.0,
          "goodput_rps": 8.10, "goodput_rps_ci": [4.76, 11.44],
          "slo_attainment": 1.0, "slo_attainment_ci": [0.722, 1.0]}


def test_a_symmetric_interval_prints_plus_minus_half_its_width() -> None:
    assert pm(8.10, [4.76, 11.44], unit=" req/s") == "8.10 ±3.34 req/s"
    assert half(8.10, [4.76, 11.44]) == " ±3.34"
    assert share_cell(0.97, [0.93, 1.01]) == "97±4"


def test_a_one_sided_interval_prints_its_bounds() -> None:
    """10 of 10 requests: Wilson's 95 % interval is [0.722, 1] (Wilson 1927); '100.0 ±13.9'
    would read up to 113.9 %."""
    assert pm(1.0, [0.722, 1.0], 1, 100, " %") == "100.0 % (95 %: 72.2-100.0)"
    assert pm(1.0, [0.722, 1.0], 1, 100, label="") == "100.0 (72.2-100.0)"
    assert share_cell(1.0, [0.886, 1.0]) == "100 (89-100)"
    assert half(95.15, [95.15, 102.47]) == ""  # the bounds follow it on the capacity line
    assert pm(19.6, [19.0, None]) == "19.60 ±?"


def test_the_window_line_says_no_slo_instead_of_an_attainment() -> None:
    given = window_line(WINDOW)
    assert "SLO met 100.0 % (95 %: 72.2-100.0)" in given and "±5.7" not in given
    assert "goodput 8.10 ±3.34 req/s" in given
    none = window_line(WINDOW, slo_given=False)
    assert "SLO met" not in none and "no SLO given" in none


def test_an_unbounded_interval_is_explained_under_the_table() -> None:
    """'151.6 ±?' was printed with nothing saying what '?' means."""
    from rich.console import Console

    from servecap.cli.steady_view import UNBOUNDED, interval_table

    entry = {"ttft_ms": {"p50": 57.4, "p99": 151.6},
             "ttft_ms_ci": {"p50": [56.2, 59.2], "p99": [140.0, None]}}
    console = Console(width=80, record=True)
    console.print(interval_table([("run", entry)]))
    text = " ".join(console.export_text().split())
    assert "151.6 ±?" in text and " ".join(UNBOUNDED.split()) in text
    bounded = {"ttft_ms": entry["ttft_ms"], "ttft_ms_ci": {"p50": [56.2, 59.2],
                                                            "p99": [140.0, 160.0]}}
    assert interval_table([("run", bounded)]).caption is None
