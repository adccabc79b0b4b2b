"""The Summary sheet: the answer on one screen, every cell a formula over the other sheets."""

from openpyxl.formatting.rule import FormulaRule
from openpyxl.styles import Alignment, PatternFill
from openpyxl.workbook.workbook import Workbook

from . import page, style
from .cached import remember
from .ledger_sheet import line_rows
from .ranks_sheet import LARGEST_ON_BINDING, largest_on_binding
from .record_sheets import write_checklist
from .source import WorkbookSource

SHEET = "Summary"
FITS_FILL = PatternFill("solid", start_color="C6EFCE")
FAILS_FILL = PatternFill("solid", start_color="FFC7CE")


def _rows(src: WorkbookSource) -> list[tuple[str, str, str | None, object]]:
    """(label, formula, number format, the value servecap computed for it)."""
    plan, dep, multi = src.plan(), src.resolved(), src.multi
    serve = src.serve
    binding = dep.plan if multi else plan
    fits = dep.fits if multi else plan.fits
    ceiling = binding.memory_ceiling_requests
    largest = max(plan.lines, key=lambda line: line.num_bytes)  # the Ledger's lines, in order
    first, last = line_rows(src)
    amounts = f"Ledger!$C${first}:$C${last}"
    label = serve.device_label or f"{serve.device_bytes:,} B"
    rows = [
        ("model", "=model", None, src.model_ref),
        ("model source", "=OFFSET(model,0,2)", None, src.spec.source),
        ("device", '=IF(device_label="",TEXT(device_bytes,"#,##0")&" B",device_label)&", "&'
         'TEXT(device_bytes/2^30,"#,##0.00")&" GiB"',
         None, f"{label}, {serve.device_bytes / 2**30:,.2f} GiB"),
        ("parallelism", '="tp "&tensor_parallel_size&" x pp "&pipeline_parallel_size&'
         '" x dp "&data_parallel_size&" = "&tensor_parallel_size*pipeline_parallel_size*'
         'data_parallel_size&IF(tensor_parallel_size*pipeline_parallel_size*data_parallel_size=1,'
         '" GPU"," GPUs")&", engine "&engine', None, _parallelism(src)),
        ("declared load", '=requests&IF(requests=1," request"," requests")&" x "&'
         'TEXT(context_tokens,"#,##0")&" tokens"'
         '&IF(explicit_lengths," (mixed lengths, longest)","")', None,
         f"{serve.concurrency} request{'' if serve.concurrency == 1 else 's'} x "
         f"{serve.context_tokens:,} tokens"
         + (" (mixed lengths, longest)" if serve.lengths else "")),
        ("verdict", '=IF(' + ("deployment_fits" if multi else "fits")
         + ',"FITS","DOES NOT FIT")', None, "FITS" if fits else "DOES NOT FIT"),
        ("memory ceiling per replica",
         "=" + ("deployment_ceiling_requests" if multi else "memory_ceiling_requests"),
         style.REQUESTS, ceiling),
        ("ceiling, all replicas", "=" + ("total_ceiling_requests" if multi
                                         else "memory_ceiling_requests"), style.REQUESTS,
         dep.total_ceiling_requests if multi else ceiling),
        ("headroom over the declared load",
         "=" + ("deployment_ceiling_requests" if multi else "memory_ceiling_requests")
         + "-requests", style.REQUESTS,
         ceiling - serve.concurrency),
        ("left on the binding device",
         "=" + ("INDEX(rank_free,MATCH(TRUE,rank_binding,0))/2^30" if multi
                else "free_bytes/2^30"), style.GIB, binding.free_bytes / 2**30),
        ("binding rank", "=" + ("binding_rank" if multi else "0"), style.COUNT,
         dep.stages[dep.binding].ranks[0] if multi else 0),
        ("largest line on the binding rank", LARGEST_ON_BINDING, None,
         largest_on_binding(src)) if multi else
        ("largest line", f"=INDEX(Ledger!$B${first}:$B${last},MATCH(MAX({amounts}),"
         f"{amounts},0))", None, largest.label),
    ] + (_ranks_sources(src) if multi else [
        ("weights from", f"=Ledger!$F${first}", None, plan.lines[0].source),
        ("runtime peak from", f"=Ledger!$F${first + 2}", None, plan.lines[2].source),
        ("safety from", f"=Ledger!$F${last}", None, plan.lines[-1].source),
    ])
    return rows


def _ranks_sources(src: WorkbookSource) -> list[tuple[str, str, str | None, object]]:
    """A deployment's lines are the Ranks sheet's, under the engine's rules: the Ledger sheet's
    sources (one GPU, the plain rules: its 10 % safety, its runtime estimate) would contradict
    the verdict above them."""
    dep = src.resolved()
    return [("lines from", '="the Ranks sheet: each rank\'s lines under "&engine&", rank "'
             '&binding_rank&" binds"', None,
             f"the Ranks sheet: each rank's lines under {src.engine.name}, rank "
             f"{dep.stages[dep.binding].ranks[0]} binds")]


def _parallelism(src: WorkbookSource) -> str:
    flags = dict(src.deploy_flags)
    tp, pp = flags.get("tensor_parallel_size", 1), flags.get("pipeline_parallel_size", 1)
    dp = flags.get("data_parallel_size", 1)
    gpus = tp * pp * dp
    return f"tp {tp} x pp {pp} x dp {dp} = {gpus} GPU{'' if gpus == 1 else 's'}, engine " \
        f"{src.engine.name}"


def write_summary(wb: Workbook, src: WorkbookSource) -> None:
    ws = wb.create_sheet(SHEET, 0)
    style.header(ws, ["summary", "value"])
    for row, (label, formula, fmt, value) in enumerate(_rows(src), start=2):
        ws.cell(row=row, column=1, value=label).font = style.LABEL_FONT
        cell = ws.cell(row=row, column=2, value=formula)
        style.as_formula(cell, fmt)
        cell.alignment = VALUE_ALIGN  # numbers too: a label's value starts where the text does
        remember(ws, cell.coordinate, value)
    verdict = f"$B${2 + [r[0] for r in _rows(src)].index('verdict')}"
    ws.conditional_formatting.add(verdict, FormulaRule(formula=[f'{verdict}="FITS"'],
                                                       fill=FITS_FILL, font=style.LABEL_FONT))
    ws.conditional_formatting.add(verdict, FormulaRule(formula=[f'{verdict}<>"FITS"'],
                                                       fill=FAILS_FILL, font=style.LABEL_FONT))
    row = len(_rows(src)) + 3
    if src.multi:
        style.note(ws, row, src.deployment.binding_reason)
    style.note(ws, row + 1, "Latency record and Verification stay hidden until servecap "
               "simulate or verify fills them (--xlsx).")
    write_checklist(ws, row + 3)
    page.break_before(ws, row + 3)  # the answer on page one, the checklist on the next
    for col, width in zip("ABCD", WIDTHS, strict=True):
        ws.column_dimensions[col].width = width
    page.finish(ws, title_rows=None)  # the checklist's page has its own header row


VALUE_ALIGN = Alignment(horizontal="left", vertical="top", wrap_text=True)
WIDTHS = (32, 56, 50, 36)
