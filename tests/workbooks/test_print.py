"""Print-ready workbooks: LibreOffice's PDF of a single-device plan is at most 12 pages, the
Ledger one page, no number shows as ###, and every sheet has its page setup (every page as
printed: test_printed_pages.py)."""

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from conftest import recalc
from openpyxl import load_workbook
from openpyxl.utils import get_column_letter
from pypdf import PdfReader

from servecap.cli.deploy import DeployFlags
from servecap.cli.inputs import PlanFlags
from servecap.cli.workbook_cmd import workbook_source
from servecap.workbooks.export import build_workbook, save_workbook
from servecap.workbooks.style import shown

PLANS = {
    "llama": ("llama-3.1-8b", PlanFlags(device="40GiB"), DeployFlags()),
    "gemma-lengths": ("gemma-2-9b-it", PlanFlags(device="h100-80gb", lengths="100,5000,5000",
                                                 shared_prefix=64), DeployFlags()),
    "deepseek": ("deepseek-v3", PlanFlags(device="2TiB", context=16384, concurrency=8),
                 DeployFlags()),
    "70b-tp8-vllm": ("llama-3.1-70b-instruct", PlanFlags(device="h100-80gb"),
                     DeployFlags(tensor_parallel_size=8, engine="vllm")),
}
LEDGER_HEADER = "from (servecap plan)"


def _pdf(binary: str, paths: list[Path], outdir: Path) -> dict[str, PdfReader]:
    """One LibreOffice run converts every workbook to PDF."""
    profile = Path(tempfile.mkdtemp(prefix="servecap-lo-profile-"))
    try:
        subprocess.run([binary, f"-env:UserInstallation={profile.as_uri()}", "--headless",
                        "--norestore", "--convert-to", "pdf", "--outdir", str(outdir),
                        *map(str, paths)], check=True, capture_output=True, timeout=300)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    return {p.stem: PdfReader(outdir / f"{p.stem}.pdf") for p in paths}


@pytest.fixture(scope="module")
def printed(soffice_bin, tmp_path_factory) -> dict[str, tuple[Path, Path, PdfReader]]:
    folder = tmp_path_factory.mktemp("print")
    paths = [save_workbook(build_workbook(workbook_source(*plan)), folder / f"{name}.xlsx")
             for name, plan in PLANS.items()]
    pdfs = _pdf(soffice_bin, paths, folder / "pdf")
    computed = recalc(soffice_bin, paths, folder / "recalculated", workers=1)
    return {p.stem: (p, computed[p.stem], pdfs[p.stem]) for p in paths}


def test_a_single_device_plan_prints_on_at_most_twelve_pages(printed) -> None:
    """Summary 2, Inputs 3, Ledger 1, Envelope 4 (the table, the ceiling per context and its
    chart), Quantization 1, Paging 1."""
    for name in ("llama", "gemma-lengths", "deepseek"):
        assert len(printed[name][2].pages) <= 12, name


def test_the_ledger_prints_on_one_page(printed) -> None:
    """The header row repeats on every page a sheet takes: one page holds it."""
    for name, (_, _, pdf) in printed.items():
        pages = [p.extract_text() for p in pdf.pages]
        ledger = [text for text in pages if LEDGER_HEADER in text]
        assert len(ledger) == 1, name
        assert "declared load fits" in ledger[0] and "memory-only ceiling" in ledger[0], name


def test_no_number_prints_as_hashes(printed) -> None:
    for name, (_, _, pdf) in printed.items():
        assert not any("###" in page.extract_text() for page in pdf.pages), name


def test_every_number_fits_its_column(printed) -> None:
    """Each numeric cell's text, as its format shows the value LibreOffice computed, is
    narrower than its column (LibreOffice prints ### otherwise)."""
    for name, (_, computed, _) in printed.items():
        wb = load_workbook(computed, data_only=True)
        for ws in wb.worksheets:
            for row in ws.iter_rows():
                for cell in row:
                    if isinstance(cell.value, bool) or not isinstance(cell.value, int | float):
                        continue
                    width = _width(ws, cell.column)
                    text = shown(cell.value, cell.number_format)
                    assert len(text) + 1 <= width, (name, ws.title, cell.coordinate, text, width)


def _width(ws, column: int) -> float:
    """A spreadsheet saves equal neighbouring columns as one <col min max> range."""
    for dim in ws.column_dimensions.values():
        if dim.min and dim.max and dim.min <= column <= dim.max:
            return dim.width
    return ws.column_dimensions[get_column_letter(column)].width


def test_every_sheet_has_a_page_setup(printed) -> None:
    wb = load_workbook(printed["70b-tp8-vllm"][0])
    for ws in wb.worksheets:
        assert ws.page_setup.orientation == "landscape", ws.title
        assert ws.sheet_properties.pageSetUpPr.fitToPage and ws.page_setup.fitToWidth == 1
        if ws.title not in ("Summary", "Latency record"):  # their second pages have their own
            assert ws.print_title_rows == "$1:$1", ws.title
        assert ws.print_area, ws.title
    assert wb["Ledger"].page_setup.fitToHeight == 1
