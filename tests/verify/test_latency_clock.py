"""verify's latency is the simulator's: time zero is the arrival, nearest-rank percentiles."""

import pytest

from servecap.runtime.latency import as_seq, latency_report
from servecap.runtime.sequence import FINISHED, RequestRecord
from servecap.sim.records import records


def _record(request_id: int, arrival: float, tokens: list[float]) -> RequestRecord:
    return RequestRecord(request_id, 10, len(tokens), FINISHED, arrival_s=arrival,
                         accepted_s=arrival + 0.005, admitted_s=arrival + 0.010,
                         prefill_start_s=arrival + 0.010, prefill_end_s=tokens[0],
                         token_ready_s=tokens, released_s=tokens[-1])


RECORDS = [_record(0, 1.0, [1.05, 1.07, 1.10]), _record(1, 2.0, [2.03, 2.04]),
           _record(2, 3.0, [3.08, 3.10, 3.13, 3.15])]


def test_every_latency_runs_from_arrival_not_acceptance() -> None:
    report = latency_report(RECORDS, 3.0)
    assert report["queue_ms"]["p50"] == pytest.approx(10.0)  # admitted - arrival
    assert report["ttft_ms"]["p50"] == pytest.approx(50.0)  # 50, 30, 80 ms: nearest rank
    assert report["ttft_ms"]["p95"] == pytest.approx(80.0)
    assert report["e2e_ms"]["p50"] == pytest.approx(100.0)  # 100, 40, 150 ms


def test_itl_and_tpot_are_the_simulators_definitions() -> None:
    report = latency_report(RECORDS, 3.0)
    # gaps: 20, 30 | 10 | 20, 30, 20 ms -> sorted 10, 20, 20, 20, 30, 30; p50 = 3rd = 20
    assert report["itl_ms"]["p50"] == pytest.approx(20.0)
    assert report["itl_ms"]["p99"] == pytest.approx(30.0)
    # tpot: (last - first) / (n - 1) = 25, 10, 23.33 ms
    assert report["tpot_ms"]["p50"] == pytest.approx(23.333, abs=1e-3)


def test_records_rows_are_the_simulators_columns_and_clock() -> None:
    rows = records("verify", "", [as_seq(r) for r in RECORDS])
    assert rows[0]["ttft_ms"] == pytest.approx(50.0) and rows[0]["queue_ms"] == pytest.approx(10)
    assert rows[1]["state"] == "completed" and rows[1]["arrival_s"] == 2.0
