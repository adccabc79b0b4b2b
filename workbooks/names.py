"""Workbook-level defined names: the stable contract for people who script against a workbook."""

from openpyxl.utils import absolute_coordinate, quote_sheetname
from openpyxl.workbook.defined_name import DefinedName
from openpyxl.workbook.workbook import Workbook

INPUT_NAMES = ("context_tokens", "requests", "device_bytes", "runtime_peak_bytes",
               "safety_bytes", "block_size_tokens")
OUTPUT_NAMES = ("weights_bytes", "kv_bytes_per_token", "kv_bytes_per_request",
                "committed_bytes", "memory_ceiling_requests")


def define(wb: Workbook, name: str, sheet: str, ref: str) -> None:
    """name -> Sheet!$A$1 (or a range 'A1:B9'), workbook scope."""
    target = f"{quote_sheetname(sheet)}!{absolute_coordinate(ref)}"
    wb.defined_names[name] = DefinedName(name, attr_text=target)


def cell_of(wb: Workbook, name: str):
    """The one cell a defined name points at, or None when the name is missing."""
    defined = wb.defined_names.get(name)
    if defined is None:
        return None
    for sheet, ref in defined.destinations:
        if sheet not in wb.sheetnames:  # the sheet was deleted or renamed
            return None
        cell = wb[sheet][ref.replace("$", "")]
        return None if isinstance(cell, tuple) else cell
    return None
