"""Build a capacity workbook and write it atomically: temp file in the same folder, os.replace."""

import os
from collections.abc import Mapping
from pathlib import Path

from openpyxl import Workbook

from servecap.ledger.errors import SpecError
from servecap.model_configs.writing import temp_beside

from . import style
from .cached import add_cached_values
from .envelope import Sweep, write_envelope
from .filename import check_workbook_name
from .inputs_sheet import write_inputs
from .ledger_sheet import write_ledger
from .paging_sheet import write_paging
from .quantization_sheet import write_quantization
from .ranks_sheet import write_ranks
from .readback import inputs_snapshot
from .record_sheets import write_latency, write_verification
from .scenario_sheet import RecordedScenario, write_scenario
from .source import WorkbookSource, weight_split
from .summary_sheet import write_summary

# Doubling steps with a point halfway (x 1.5) between: 15 points from 1K to 128K tokens.
DEFAULT_CONTEXTS_TOKENS = tuple(sorted({1024 << k for k in range(8)}
                                       | {1536 << k for k in range(7)}))
SHEETS = ("Summary", "Inputs", "Ledger", "Envelope", "Quantization", "Paging", "Scenario",
          "Latency record", "Verification")  # Scenario: where the scenario is recorded


def default_sweep(src: WorkbookSource) -> Sweep:
    """One device (the plan's), the standard context ladder plus the plan's, and the plan's KV
    dtype beside bf16 and fp8."""
    serve = src.serve
    contexts = tuple(sorted({*DEFAULT_CONTEXTS_TOKENS, serve.context_tokens}))
    kv = tuple(dict.fromkeys((serve.kv_dtype, "bf16", "fp8")))
    label = serve.device_label or f"{serve.device_bytes:,} B"
    return Sweep(((label, serve.device_bytes),), contexts, kv)


def build_workbook(src: WorkbookSource, sweep: Sweep | None = None,
                   results: Mapping | None = None,
                   scenario: RecordedScenario | None = None) -> Workbook:
    """Every sheet, formulas over named inputs; `results` fills the Latency record; `scenario`
    (what every servecap command passes) is recorded on the Scenario sheet."""
    wb = Workbook()
    wb.remove(wb.active)
    style.use_default_font(wb)
    write_inputs(wb, src)
    write_ledger(wb, src)
    if src.multi:
        write_ranks(wb, src)
    write_envelope(wb, sweep or default_sweep(src), src)
    write_quantization(wb, src.plan(), src.kinds, weight_split(src).formats)
    write_paging(wb, src.serve.block_size_tokens, src.serve)
    if scenario is not None:
        write_scenario(wb, scenario, inputs_snapshot(wb))
    write_latency(wb, results)
    write_verification(wb)
    write_summary(wb, src)
    for ws in wb.worksheets:  # each sheet set up its own page when it was written
        if ws.sheet_state == "hidden":  # a blank template prints nothing (a blank cell)
            ws.print_area = f"A{ws.max_row + 2}"
    wb.calculation.fullCalcOnLoad = True  # cached values are servecap's: recalculate on open
    return wb


def save_workbook(wb: Workbook, path: Path, force: bool = False, field: str = "--xlsx") -> Path:
    """Never a half-written file: save beside the target, then rename over it in one step. An
    existing file is replaced only with force."""
    path = Path(path)
    if path.is_dir() or not path.parent.is_dir():
        raise SpecError(field, str(path), "must be a file in an existing folder")
    check_workbook_name(path, field)
    if path.exists() and not force:
        raise SpecError(field, str(path), "file exists; pass --force to replace it")
    try:
        with temp_beside(path) as (handle, tmp):  # removed on failure and on SIGTERM
            os.close(handle)
            wb.save(tmp)
            add_cached_values(wb, Path(tmp))
            mask = os.umask(0)  # mkstemp's 0600 would keep colleagues out: respect the umask
            os.umask(mask)
            os.chmod(tmp, 0o666 & ~mask)
            os.replace(tmp, path)
    except OSError as exc:
        raise SpecError(field, str(path), f"cannot be written ({exc.strerror})") from None
    return path
