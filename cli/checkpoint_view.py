"""A quantized checkpoint's formats and what vLLM holds on each GPU generation, as text (rich;
the JSON keys are cli/plan_json.py's)."""

from rich.console import Console


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
