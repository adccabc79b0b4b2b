"""Every kind of workbook servecap writes, printed to PDF by a real LibreOffice (one run for all)
and read back page by page: each chart whole on its page, no error or clipped text, no raw
float, every sheet at 70 % scale or more, every wrapped text cell whole.

SERVECAP_LEDGER_PNG=docs/img/ledger-page.png renders the single-device plan's Ledger page to
that file (the picture in the README)."""

import os
import re
from pathlib import Path

import pytest
from conftest import soffice
from openpyxl import load_workbook
from openpyxl.utils import range_boundaries
from pdf_pages import by_sheet, read_pages
from test_print import _pdf
from typer.testing import CliRunner

from servecap.cli.app import app

ROOT = Path(__file__).resolve().parents[2]
CHAT = str(ROOT / "workloads" / "chat.yaml")
H100 = ["--device", "h100-80gb"]
SLO = ["--slo-ttft", "500ms", "--slo-tpot", "50ms"]
# name -> the command line that writes it (the file goes last)
BOOKS = {
    "plan": ["plan", "llama-3.1-8b", *H100, "--xlsx"],
    "plan-tp": ["plan", "llama-3.1-70b-instruct", *H100, "--context", "8192", "-tp", "4",
                "-pp", "2", "--xlsx"],
    "plan-vllm": ["plan", "llama-3.1-8b", *H100, "--engine", "vllm", "--xlsx"],
    # a gated-DeltaNet hybrid: the fixed-state line on the Ledger, vLLM's hybrid pages on Ranks
    "plan-hybrid": ["plan", "qwen3.6-35b-a3b", *H100, "-tp", "2", "--engine", "vllm",
                    "--context", "32768", "--xlsx"],
    "envelope": ["workbook", "llama-3.1-8b", "--device", "40GiB", "--device", "80GiB",
                 "--context", "4096", "--context", "32768", "-o"],
    "simulate": ["simulate", "llama-3.1-8b", *H100, "--workload", CHAT, "--policy",
                 "chunked-prefill", "--slo-ttft", "500ms", "--xlsx"],
    "sweep": ["sweep", "llama-3.1-8b", *H100, "--workload", CHAT, *SLO, "--xlsx"],
    "search": ["search", "llama-3.1-8b", "--workload", CHAT, "--rate", "4", "--slo-ttft", "1s",
               "--slo-tpot", "50ms", "--devices", "h100-80gb", "--max-gpus", "2",
               "--num-requests", "100", "--workers", "1", "--xlsx"],
    "verify": ["verify", "tiny-llama", "--device", "cpu", "--xlsx"],
    # two releases side by side, the reasons and vLLM's source wrapped under the table
    "diff": ["diff", "llama-3.1-8b", *H100, "--engine", "vllm==0.21", "--against", "vllm==0.23",
             "--xlsx"],
}
ERRORS = ("#N/A", "###", "#VALUE!", "#REF!", "#NAME?", "#DIV/0!", "#NUM!", "Err:")
RAW_FLOAT = re.compile(r"\d\.\d{5,}")  # a number printed without a number format
MIN_SCALE = 0.7
FONT_POINTS = 10  # the workbooks' Arial 10


@pytest.fixture(scope="module")
def printed(tmp_path_factory):
    binary = soffice()
    folder = tmp_path_factory.mktemp("printed")
    paths = []
    for name, args in BOOKS.items():
        if name == "verify":
            pytest.importorskip("torch")
        path = folder / f"{name}.xlsx"
        result = CliRunner().invoke(app, [*args, str(path)])
        assert result.exit_code == 0 and path.exists(), (name, result.output)
        paths.append(path)
    _pdf(binary, paths, folder / "pdf")
    printed.pdf_folder = folder / "pdf"
    return {p.stem: (load_workbook(p), read_pages(folder / "pdf" / f"{p.stem}.pdf"))
            for p in paths}


def test_every_kind_of_workbook_was_printed(printed) -> None:
    assert set(printed) == set(BOOKS)
    sheets = {name: set(by_sheet(pages)) for name, (_, pages) in printed.items()}
    assert "Ranks" in sheets["plan-tp"] and "Ranks" in sheets["plan-vllm"]
    assert "Latency record" in sheets["sweep"] and "Latency record" in sheets["simulate"]
    assert {"Verification", "Latency record"} <= sheets["verify"]
    assert sheets["search"] == {"Search", "Frontier", "Scenario"}
    assert sheets["diff"] == {"Diff", "Scenario"}
    for name, (_, pages) in printed.items():  # every workbook records its scenario, in print
        text = " ".join(page.text for page in by_sheet(pages)["Scenario"])
        assert "model.name" in text and "envelope.kv_dtypes" in text, name
    for name, (book, _) in printed.items():  # a hidden (blank) sheet prints nothing
        assert sheets[name] == {ws.title for ws in book.worksheets
                                if ws.sheet_state == "visible"}, name


def test_the_page_counts_docs_state_are_the_printed_ones(printed) -> None:
    """docs/workbooks.md states how many pages a single-device plan prints, sheet by sheet,
    and that a hybrid's Inputs prints on 4: LibreOffice's pages, counted."""
    doc = (ROOT / "docs" / "workbooks.md").read_text()
    stated = re.search(r"is (\d+) pages: Summary (\d+) \(the answer, then the review "
                       r"checklist\), Inputs (\d+),\s+Ledger (\d+), Envelope (\d+), "
                       r"Quantization (\d+), Paging (\d+), Scenario (\d+)\.", doc)
    assert stated, "docs/workbooks.md no longer states the single-device page counts"
    total, *each = (int(n) for n in stated.groups())
    _, pages = printed["plan"]
    sheets = by_sheet(pages)
    names = ("Summary", "Inputs", "Ledger", "Envelope", "Quantization", "Paging", "Scenario")
    assert {name: len(sheets[name]) for name in names} == dict(zip(names, each, strict=True))
    assert len(pages) == total
    assert f"bold. {len(sheets['Scenario'])} pages |" in doc  # the Scenario row of the table
    hybrid = re.search(r"a hybrid's Inputs prints on (\d+) pages", doc)
    assert hybrid and len(by_sheet(printed["plan-hybrid"][1])["Inputs"]) == int(hybrid[1])


def test_no_error_value_or_raw_float_prints(printed) -> None:
    for name, (_, pages) in printed.items():
        for page in pages:
            for error in ERRORS:
                assert error not in page.text, (name, page.sheet, error)
            assert not RAW_FLOAT.search(page.text), (name, page.sheet, RAW_FLOAT.findall(
                page.text))


def test_no_text_is_off_the_page_or_clipped(printed) -> None:
    """Every letter and digit the PDF holds is on its page and drawn (text a print area, a
    neighbouring cell or a row too short cuts off is held but hidden), and no two words are
    printed over each other (wrapped text running into the row below)."""
    for name, (_, pages) in printed.items():
        for page in pages:
            assert not page.outside, (name, page.sheet, page.number, "".join(page.outside))
            assert not page.inkless, (name, page.sheet, page.number, "".join(page.inkless))
            assert not page.overlaps, (name, page.sheet, page.number, page.overlaps)


def test_every_sheet_prints_at_seventy_percent_or_more(printed) -> None:
    for name, (_, pages) in printed.items():
        for page in pages:
            scale = page.font_points / FONT_POINTS
            assert scale >= MIN_SCALE, (name, page.sheet, page.number, f"{scale:.0%}")


def test_every_chart_prints_whole_on_a_page_of_its_sheet(printed) -> None:
    """Its title, axis titles and every legend entry are on one page of its sheet, and that
    page is neither off nor clipped (the test above): the whole chart is inside the page."""
    count = 0
    for name, (book, pages) in printed.items():
        sheets = by_sheet(pages)
        for ws in book.worksheets:
            for chart in ws._charts:
                count += 1
                words, y_title = _chart_words(book, chart), _rich(chart.y_axis.title)
                assert any(words <= page.words and y_title in page.rotated
                           for page in sheets[ws.title]), (name, ws.title, words, y_title)
    assert count >= 10


def test_wrapped_text_prints_whole(printed) -> None:
    """A wrapped cell in a print area prints every word (a row too short drops lines)."""
    for name, (book, pages) in printed.items():
        sheets = by_sheet(pages)
        for ws in book.worksheets:
            if ws.sheet_state != "visible":
                continue
            printed_words = set.union(*(_tokens(page.text) for page in sheets[ws.title]))
            for cell in _wrapped_cells(ws):
                missing = [word for word in _tokens(str(cell.value)) - printed_words
                           if not _broken(word, printed_words)]
                assert not missing, (name, ws.title, cell.coordinate, missing)


def test_a_hybrid_prints_its_state_line_and_page_arithmetic(printed) -> None:
    book, pages = printed["plan-hybrid"]
    (ledger,) = by_sheet(pages)["Ledger"]
    assert "fixed state in use" in ledger.text and "fixed state per request" in ledger.text
    ranks = " ".join(page.text for page in by_sheet(pages)["Ranks"])
    assert "attention block size" in ranks and "page (every group's, padded)" in ranks
    assert "1,088 tokens" in ranks  # 64 x cdiv(state, 64 x one token) at tp 2 on an H100 from
    # vLLM 0.33 (FlashInfer's GDN checkpoints; 16 x ... = 1,056 before): docs/hybrid.md


def test_the_ledger_is_one_page_with_its_chart(printed) -> None:
    _, pages = printed["plan"]
    (ledger,) = by_sheet(pages)["Ledger"]
    assert {"Memory", "device", "weights", "safety"} <= ledger.words
    assert "declared load fits" in ledger.text
    target = os.environ.get("SERVECAP_LEDGER_PNG")
    if target:
        _render(pages.index(ledger), Path(target))


def _render(index: int, target: Path) -> None:
    import pdfplumber

    source = printed.pdf_folder / "plan.pdf"
    with pdfplumber.open(source) as pdf:
        image = pdf.pages[index].to_image(resolution=96).original.convert("RGB").quantize(128)
        image.save(target, optimize=True)  # 128 colours: the text as sharp, a third the bytes


def _tokens(text: str) -> set[str]:
    """Words, split where a line may break too (after a hyphen or a slash)."""
    return set(re.split(r"[\s/-]+", text)) - {""}


def _broken(word: str, printed: set[str]) -> bool:
    """A word longer than its column (a hash, a path) breaks anywhere: its pieces print."""
    return sum(len(piece) for piece in printed if len(piece) >= 4 and piece in word) >= len(word)


def _chart_words(book, chart) -> set[str]:
    texts = [_rich(chart.title), _rich(chart.x_axis.title)]
    if chart.legend is not None:
        texts += [_cell_text(book, s.tx.strRef.f) for s in chart.series if s.tx and s.tx.strRef]
    return {word for text in texts if text for word in text.split()}


def _rich(title) -> str:
    if title is None or title.tx is None or title.tx.rich is None:
        return ""
    return " ".join(run.t for p in title.tx.rich.p for run in (p.r or []) if run.t)


def _cell_text(book, ref: str) -> str:
    sheet, cell = re.fullmatch(r"'?(.+?)'?!(.+)", ref).groups()
    return str(book[sheet][cell.replace("$", "")].value or "")


def _wrapped_cells(ws):
    for area in ws.print_area.split(","):
        min_col, min_row, max_col, max_row = range_boundaries(
            area.split("!")[-1].replace("$", ""))
        for row in ws.iter_rows(min_row=min_row, max_row=max_row, min_col=min_col,
                                max_col=max_col):
            for cell in row:
                if isinstance(cell.value, str) and cell.alignment.wrap_text \
                        and not cell.value.startswith("="):
                    yield cell


def test_no_scenario_page_ends_on_a_section_heading(printed) -> None:
    """A section's heading prints on the page of its first rows: LibreOffice's own page breaks
    left 'scheduler' and 'search' alone at the bottom of a page, their rows on the next."""
    for name, (book, pages) in printed.items():
        ws = book["Scenario"]
        headings = {c.value for (c,) in ws.iter_rows(min_row=2, max_col=1)
                    if isinstance(c.value, str) and c.font.i and "." not in c.value}
        assert {"model", "scheduler", "server"} <= headings, (name, headings)
        seen = set()
        for page in by_sheet(pages)["Scenario"]:
            lines = [line.strip() for line in page.text.splitlines() if line.strip()][:-1]
            for i, line in enumerate(lines):
                if line in headings:
                    seen.add(line)
                    after = lines[i + 1] if i + 1 < len(lines) else "(the page's end)"
                    assert after.startswith(line + "."), (name, page.number, line, after)
        assert seen == headings, (name, headings - seen)
