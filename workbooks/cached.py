"""Cached values beside formulas: what servecap already computed, stored in the sheet XML.

openpyxl writes a formula cell with an empty <v/>; readers that do not recalculate (pandas,
openpyxl data_only, web previews) then see blanks. The writers remember the value of each
formula cell they know (the plan's own numbers), and after saving, the sheet XML gets them.
A recalculating reader (Excel, LibreOffice) computes the same values: the workbook still asks
for a full calculation on load.
"""

import re
import shutil
import zipfile
from pathlib import Path
from xml.sax.saxutils import escape

from openpyxl.workbook.workbook import Workbook

ATTRIBUTE = "_servecap_cached"
_CELL = re.compile(r'<c r="([A-Z]+[0-9]+)"((?: s="[0-9]+")?)><f>(.*?)</f><v ?/></c>', re.S)


def remember(ws, coordinate: str, value) -> None:
    """The value the formula at `coordinate` evaluates to (None: unknown, left blank)."""
    if value is None:
        return
    store = ws.parent.__dict__.setdefault(ATTRIBUTE, {})
    store[(ws.title, coordinate)] = value


def known(ws, coordinate: str):
    """The value remembered for a cell, or None."""
    return ws.parent.__dict__.get(ATTRIBUTE, {}).get((ws.title, coordinate))


def _xml_value(value) -> tuple[str, str]:
    """(type attribute, <v> text) as the spreadsheet format stores a cached result."""
    if isinstance(value, bool):
        return ' t="b"', "1" if value else "0"
    if isinstance(value, int | float):
        return "", repr(float(value)) if isinstance(value, float) else str(value)
    return ' t="str"', escape(str(value))


def add_cached_values(wb: Workbook, path: Path) -> None:
    """Rewrite the saved file's sheet XML with the remembered values (sheetN = Nth sheet)."""
    store = wb.__dict__.get(ATTRIBUTE) or {}
    if not store:
        return
    by_part = {f"xl/worksheets/sheet{i}.xml": ws.title
               for i, ws in enumerate(wb.worksheets, start=1)}
    tmp = Path(f"{path}.cached")
    try:
        with zipfile.ZipFile(path) as src, \
                zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as out:
            for info in src.infolist():
                data = src.read(info.filename)
                title = by_part.get(info.filename)
                if title is not None:
                    data = _fill(data.decode("utf-8"), title, store).encode("utf-8")
                out.writestr(info, data)
        shutil.move(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _fill(xml: str, title: str, store: dict) -> str:
    def cell(match: re.Match) -> str:
        ref, style_attr, formula = match.groups()
        if (title, ref) not in store:
            return match.group(0)
        kind, text = _xml_value(store[(title, ref)])
        return f'<c r="{ref}"{style_attr}{kind}><f>{formula}</f><v>{text}</v></c>'
    return _CELL.sub(cell, xml)
