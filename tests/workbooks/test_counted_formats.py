"""A count's unit agrees with its number ('1 request', '2 requests') in the text LibreOffice
shows, for typed values and for formulas it recalculates, and servecap's own rendering of a
format (style.shown, which sizes the columns) is that same text."""

import csv
import subprocess
import tempfile
from pathlib import Path

from openpyxl import Workbook

from servecap.workbooks import style

FORMATS = {"request": style.REQUESTS, "token": style.TOKENS, "layer": style.LAYERS,
           "head": style.HEADS, "block": style.BLOCKS, "bit": style.BITS,
           "param": style.PARAMS, "element": style.ELEMENTS}
VALUES = (1, 2, 0, -1, -3, 1234, 1_000_000)


def _as_shown(soffice_bin: str, book: Path, outdir: Path) -> list[list[str]]:
    """The sheet as LibreOffice displays it: CSV with 'save cell contents as shown'."""
    profile = Path(tempfile.mkdtemp(prefix="servecap-lo-profile-"))
    subprocess.run([soffice_bin, f"-env:UserInstallation={profile.as_uri()}", "--headless",
                    "--norestore", "--convert-to",
                    "csv:Text - txt - csv (StarCalc):44,34,76,1,,0,false,true,true",
                    "--outdir", str(outdir), str(book)], check=True, capture_output=True,
                   timeout=300)
    with open(outdir / (book.stem + ".csv"), newline="") as f:
        return list(csv.reader(f))


def test_counts_read_singular_at_one_and_plural_otherwise(soffice_bin, tmp_path) -> None:
    wb = Workbook()
    ws = wb.active
    for row, value in enumerate(VALUES, start=1):
        for col, fmt in enumerate(FORMATS.values(), start=1):
            typed = ws.cell(row=row, column=2 * col - 1, value=value)
            typed.number_format = fmt
            # a formula whose value LibreOffice computes on load: the format follows it
            ws.cell(row=row, column=2 * col, value=f"={value}+0*ROW()").number_format = fmt
    book = tmp_path / "counts.xlsx"
    wb.save(book)
    rows = _as_shown(soffice_bin, book, tmp_path)
    for row, value in zip(rows, VALUES, strict=True):
        for col, (unit, fmt) in enumerate(FORMATS.items()):
            want = f"{value:,} {unit}" + ("" if value == 1 else "s")
            assert row[2 * col] == row[2 * col + 1] == want, (unit, value, row)
            assert style.shown(value, fmt) == want, (unit, value)
