"""A quantized checkpoint's formats and what vLLM holds on each GPU generation, as text (rich)
and as the plan's JSON keys."""

from rich.console import Console


def checkpoint_to_dict(report) -> dict:
    """plan --json: `checkpoint_formats` (null for an unquantized checkpoint)."""
    if report is None:
        return {"checkpoint_formats": None}
    on = report.on_device
    return {"checkpoint_formats": {
        "producer": report.producer, "checkpoint_bytes": report.checkpoint_bytes,
        "vllm_release": report.release,
        "formats": [{"format": s.name, "bits": s.bits, "num_parameters": s.num_parameters,
                     "value_bytes": s.value_bytes, "metadata_bytes": s.metadata_bytes,
                     "scales": s.scales} for s in report.shares],
        "resident_by_generation": [
            {"generation": r.generation, "compute_capability": r.sm, "runs": r.runs,
             "resident_bytes": r.resident_bytes if r.runs else None, "kernel_or_refusal": r.how}
            for r in report.rows],
        "device_compute_capability": report.sm,
        "device_generation": on.generation if on is not None else None}}


def render_checkpoint(report, console: Console) -> None:
    """One line a generation (rich wraps the kernel text at any width)."""
    if report is None:
        return
    console.print(f"{report.producer} checkpoint, {report.checkpoint_bytes:,} B = "
                  f"{report.checkpoint_bytes / 2**30:,.2f} GiB: held by vLLM {report.release}, "
                  "by GPU generation:", highlight=False)
    on = report.on_device
    for row in report.rows:
        where = f"{row.generation} (SM{row.sm}+{', this GPU' if row is on else ''})"
        if row.runs:
            text = (f"  {where}: {row.resident_bytes:,} B = {row.resident_bytes / 2**30:,.2f} "
                    f"GiB; {row.how}")
        else:
            text = f"  {where}: refused: {row.how}"
        console.print(text, style=None if row.runs else "dim", highlight=False, markup=False)
