"""Read a LibreOffice PDF of a workbook as a reviewer sees it: which sheet each page is (the
footer names it), every character with its box and size, and whether it is drawn (a character
the PDF holds but a clip hides has no ink on the rendered page)."""

import re
from collections import Counter
from dataclasses import dataclass

import pdfplumber

FOOTER = re.compile(r"^(?P<sheet>.+), page (?P<page>\d+) of (?P<pages>\d+)$", re.M)
RESOLUTION = 100  # dots per inch of the rendering the ink check reads
INK = 40  # grey levels between a character box's darkest and lightest pixel: something drawn


@dataclass
class Page:
    sheet: str
    number: int
    text: str
    words: set[str]  # of the upright text; the words of rotated text (a y-axis title) below
    rotated: str
    font_points: float  # the size most of the page's characters print at
    outside: list[str]  # characters (partly) off the page
    inkless: list[str]  # characters in the PDF with nothing drawn in their box
    overlaps: list[tuple[str, str]]  # words printed over each other (a row too short for them)


def read_pages(path) -> list[Page]:
    with pdfplumber.open(path) as pdf:
        return [_page(page) for page in pdf.pages]


def _page(page) -> Page:
    text = page.extract_text() or ""
    footer = FOOTER.search(text)
    assert footer, f"page {page.page_number} has no 'SHEET, page N of M' footer: {text[-80:]!r}"
    gray = page.to_image(resolution=RESOLUTION).original.convert("L")
    outside, inkless = [], []
    for char in page.chars:
        if not char["text"].isalnum():
            continue
        if char["x0"] < -0.5 or char["x1"] > page.width + 0.5 or char["top"] < -0.5 \
                or char["bottom"] > page.height + 0.5:
            outside.append(char["text"])
        elif not _drawn(gray, char):
            inkless.append(char["text"])
    sizes = Counter(round(char["size"], 1) for char in page.chars if char["text"].isalnum())
    rotated = "".join(char["text"] for char in page.chars if not char["upright"])
    return Page(footer["sheet"], int(footer["page"]), text, set(re.findall(r"\S+", text)),
                rotated, sizes.most_common(1)[0][0] if sizes else 0.0, outside, inkless,
                _overlaps(page.extract_words()))


def _overlaps(words: list[dict]) -> list[tuple[str, str]]:
    """Pairs of words whose boxes share more than a third of the smaller one's area."""
    words = sorted(words, key=lambda w: w["top"])
    out = []
    for i, a in enumerate(words):
        for b in words[i + 1:]:
            if b["top"] >= a["bottom"]:
                break
            dx = min(a["x1"], b["x1"]) - max(a["x0"], b["x0"])
            dy = min(a["bottom"], b["bottom"]) - max(a["top"], b["top"])
            small = min((a["x1"] - a["x0"]) * (a["bottom"] - a["top"]),
                        (b["x1"] - b["x0"]) * (b["bottom"] - b["top"]))
            if dx > 0 and dy > 0 and dx * dy > small / 3:
                out.append((a["text"], b["text"]))
    return out


def _drawn(gray, char) -> bool:
    scale = RESOLUTION / 72
    box = (int(char["x0"] * scale), int(char["top"] * scale),
           max(int(char["x1"] * scale), int(char["x0"] * scale) + 1) + 1,
           max(int(char["bottom"] * scale), int(char["top"] * scale) + 1) + 1)
    low, high = gray.crop(box).getextrema()
    return high - low >= INK


def by_sheet(pages: list[Page]) -> dict[str, list[Page]]:
    out: dict[str, list[Page]] = {}
    for page in pages:
        out.setdefault(page.sheet, []).append(page)
    return out
