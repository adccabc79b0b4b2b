"""The Paging sheet: the block-size trade for the declared live lengths, as formulas."""

from openpyxl.workbook.workbook import Workbook

from . import style

SHEET = "Paging"
BLOCK_SIZES_TOKENS = (1, 4, 8, 16, 32, 64, 128)
HEADERS = ["block size [tokens/block]", "logical tokens [tokens]", "block-table entries [count]",
           "shared prefix blocks [blocks]", "physical blocks [blocks]", "token slots [tokens]",
           "unused slots [tokens]", "slot fill [%]"]
# Seed 000: Σ_r ceil(S_r / B) blocks; only each last block holds rounding waste; a shared
# prefix's full blocks are stored once (ledger.paging.paging_report).
FORMULAS = (
    ("=SUMPRODUCT(load_requests,load_lengths_tokens)", style.TOKENS),
    ("=SUMPRODUCT(load_requests,ROUNDUP(load_lengths_tokens/A{r},0))", style.COUNT),
    ("=INT(MIN(shared_prefix_tokens,MIN(load_lengths_tokens))/A{r})", style.BLOCKS),
    ("=C{r}-D{r}*MAX(requests-1,0)", style.BLOCKS),
    ("=E{r}*A{r}", style.TOKENS),
    ("=C{r}*A{r}-B{r}", style.TOKENS),
    ("=IF(F{r}>0,B{r}/F{r},0)", style.FRACTION),
)


def block_sizes(declared_tokens: int) -> tuple[int, ...]:
    return tuple(sorted({*BLOCK_SIZES_TOKENS, declared_tokens}))


def write_paging(wb: Workbook, declared_block_size_tokens: int) -> None:
    ws = wb.create_sheet(SHEET)
    style.header(ws, HEADERS)
    for r, size in enumerate(block_sizes(declared_block_size_tokens), start=2):
        style.as_input(ws.cell(row=r, column=1, value=size), style.TOKENS)
        for col, (formula, number_format) in enumerate(FORMULAS, start=2):
            style.as_formula(ws.cell(row=r, column=col, value=formula.format(r=r)),
                             number_format)
    note = len(block_sizes(declared_block_size_tokens)) + 3
    style.note(ws, note, "Smaller blocks waste fewer slots in each request's last "
               "block but need more block-table entries and allocations; the live lengths are the "
               "table on Inputs (F:G).")
    style.fit_columns(ws)
