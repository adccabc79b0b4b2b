"""The Paging sheet: the block-size trade for the declared live lengths, as formulas."""

from openpyxl.workbook.workbook import Workbook

from servecap.ledger.paging import paging_report
from servecap.ledger.serve import ServeSpec

from . import page, style
from .cached import remember

SHEET = "Paging"
BLOCK_SIZES_TOKENS = (1, 4, 8, 16, 32, 64, 128)
HEADERS = ["block size [tokens/block]", "logical tokens [tokens]", "block-table entries [count]",
           "shared prefix blocks [blocks]", "physical blocks [blocks]", "token slots [tokens]",
           "stored tokens [tokens]", "unused slots [tokens]", "slot fill [%]"]
# Seed 000: Σ_r ceil(S_r / B) blocks; only each last block holds rounding waste; a shared
# prefix's full blocks are stored once (ledger.paging.paging_report): logical tokens count the
# prefix in every request, stored tokens once, and stored + unused = token slots.
FORMULAS = (
    ("=SUMPRODUCT(load_requests,load_lengths_tokens)", style.TOKENS),
    ("=SUMPRODUCT(load_requests,ROUNDUP(load_lengths_tokens/A{r},0))", style.COUNT),
    ("=INT(MIN(shared_prefix_tokens,MIN(load_lengths_tokens))/A{r})", style.BLOCKS),
    ("=C{r}-D{r}*MAX(requests-1,0)", style.BLOCKS),
    ("=E{r}*A{r}", style.TOKENS),
    ("=B{r}-D{r}*A{r}*MAX(requests-1,0)", style.TOKENS),
    ("=F{r}-G{r}", style.TOKENS),
    ("=IF(F{r}>0,G{r}/F{r},0)", style.FRACTION),
)


def _report_row(serve: ServeSpec, size: int) -> list:
    report = paging_report(list(serve.live_lengths), size, serve.shared_prefix_tokens)
    fill = report.stored_tokens / report.slot_tokens if report.slot_tokens > 0 else 0
    return [report.logical_tokens, report.block_table_entries, report.shared_blocks,
            report.num_blocks, report.slot_tokens, report.stored_tokens,
            report.unused_slot_tokens, fill]


def block_sizes(declared_tokens: int) -> tuple[int, ...]:
    return tuple(sorted({*BLOCK_SIZES_TOKENS, declared_tokens}))


def write_paging(wb: Workbook, declared_block_size_tokens: int,
                 serve: ServeSpec | None = None) -> None:
    """With `serve`, each row carries paging_report's numbers as cached values."""
    ws = wb.create_sheet(SHEET)
    style.header(ws, HEADERS)
    for r, size in enumerate(block_sizes(declared_block_size_tokens), start=2):
        style.as_input(ws.cell(row=r, column=1, value=size), style.TOKENS)
        values = _report_row(serve, size) if serve is not None else [None] * len(FORMULAS)
        for col, (formula, number_format) in enumerate(FORMULAS, start=2):
            cell = ws.cell(row=r, column=col, value=formula.format(r=r))
            style.as_formula(cell, number_format)
            remember(ws, cell.coordinate, values[col - 2])
    note = len(block_sizes(declared_block_size_tokens)) + 3
    style.fit_columns(ws)
    style.note(ws, note, "Smaller blocks waste fewer slots in each request's last "
               "block but need more block-table entries and allocations; the live lengths are the "
               "table on Inputs (F:G).", last_col=len(HEADERS))
    page.finish(ws)
