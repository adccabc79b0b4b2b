"""What a workbook's file may be called (no openpyxl here: commands check it before they run)."""

from pathlib import Path

from servecap.ledger.errors import SpecError

SUFFIX = ".xlsx"


def check_workbook_name(path: Path, field: str = "--xlsx") -> None:
    """A workbook is written as Office Open XML: its name must end in .xlsx, or Excel and
    LibreOffice refuse or misread it (out.csv held a zip that no CSV reader opens)."""
    if Path(path).suffix.lower() != SUFFIX:
        raise SpecError(field, str(path), f"a workbook's name ends in {SUFFIX} (it is written "
                        f"as an Excel workbook), e.g. {Path(path).with_suffix(SUFFIX).name}")
