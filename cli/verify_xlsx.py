"""verify --xlsx: the capacity workbook of the verified plan, its Verification sheet filled."""

from pathlib import Path

from .files import announce
from .verify_view import ceiling_tolerance
from .workbook_cmd import _need_excel

VERIFY_KEYS = ("line", "predicted_bytes", "measured_bytes", "residual_bytes", "verdict")
LATENCY_KEYS = {"queue_ms": "queue_delay_ms", "ttft_ms": "ttft_ms", "itl_ms": "itl_ms",
                "e2e_ms": "e2e_ms"}


def write_verified_workbook(model_ref: str, result, rows: list[dict], output: Path,
                            force: bool, recording=None) -> Path:
    """Ledger, envelope and review sheets of the plan as verified; the Latency record holds
    the run's percentiles and benchmark-input record; Verification holds every line; the
    Scenario sheet the scenario verified (`recording`, a workbook_scenario.Recording)."""
    _need_excel()
    from servecap.workbooks.export import build_workbook, save_workbook
    from servecap.workbooks.record_sheets import fill_verification
    from servecap.workbooks.source import WorkbookSource

    src = WorkbookSource(model_ref, result.spec, result.plan.serve)
    wb = build_workbook(src, results=latency_results(result.latency, result.record),
                        scenario=recording and recording.rows(result.plan, output))
    fill_verification(wb, [_row(row) for row in rows] + [_ceiling(result.reconciliation)],
                      _record(result.record))
    return announce(save_workbook(wb, output, force))


def _row(row: dict) -> dict:
    """A reconciled line as the sheet shows it: the CLI's name and rule in words."""
    out = {key: row[key] for key in VERIFY_KEYS}
    out["name"] = row.get("label") or row["line"]
    out["tolerance"] = row.get("detail") or row.get("tolerance") or ""
    return out


def _ceiling(rec) -> dict:
    """The memory-only ceiling, predicted vs probed, in requests."""
    measured = rec.measured_ceiling_requests
    return {"line": "memory_ceiling_requests", "unit": "requests",
            "predicted_bytes": rec.predicted_ceiling_requests, "measured_bytes": measured,
            "residual_bytes": None if measured is None
            else measured - rec.predicted_ceiling_requests,
            "verdict": rec.ceiling_verdict if measured is not None or rec.ceiling_failure
            else "not measured",
            "tolerance": rec.ceiling_failure or ceiling_tolerance(rec)}


def _record(record: dict) -> dict:
    """The run record's plain fields (numbers and text), for the sheet's provenance block."""
    return {key: value for key, value in record.items()
            if isinstance(value, str | int | float) and not isinstance(value, bool)}


def write_failed_workbook(model_ref: str, result, rows: list[dict], output: Path,
                          force: bool, recording=None) -> Path:
    """Ranks that failed: the plan's sheets and one Verification row per failure."""
    _need_excel()
    from servecap.workbooks.export import build_workbook, save_workbook
    from servecap.workbooks.record_sheets import fill_verification
    from servecap.workbooks.source import WorkbookSource

    wb = build_workbook(WorkbookSource(model_ref, result.spec, result.serve),
                        scenario=recording and recording.rows(None, output))
    fill_verification(wb, [_row(row) for row in rows])
    return announce(save_workbook(wb, output, force))


def latency_results(latency: dict, record: dict) -> dict:
    """The run's numbers under the Latency record sheet's keys (ms percentiles, tokens/s)."""
    out = {sheet: {p: latency[key][p] for p in ("p50", "p95", "p99")}
           for key, sheet in LATENCY_KEYS.items() if latency["num_finished"]}
    out["input_tokens_per_s"] = latency["input_tokens_per_s"]
    out["output_tokens_per_s"] = latency["output_tokens_per_s"]
    out["record"] = {
        "model_revision": f"{record['model']} ({record['config_hash']}; {record['weights']})",
        "prompt_distribution": record["workload"],
        "output_distribution": record["workload"],
        "warmup": record["warmup"],
        "kernel_versions": f"torch {record['torch_version']}, CUDA {record['cuda_version']}",
        "driver_versions": str(record["driver_version"]),
        "accelerator_topology": f"{record['device_name']}; {record['topology']}",
        "load_generator": "open loop: " + ("each request added at its arrival time"
                                           if record.get("realtime") else
                                           "every request added at t=0 (as fast as possible)"),
        "achieved_rate": latency["num_finished"] / latency["wall_s"],
        "source": "servecap verify run",
    }
    return out
