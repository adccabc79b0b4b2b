"""The workbook's charts, each series bound to cells: memory breakdown, ceiling envelope, latency
against offered load. Each chart is anchored to a block of cells (so it lies inside the sheet's
print area), its legend below the plot, its series in colours told apart in print."""

import math
from collections.abc import Sequence
from dataclasses import dataclass

from openpyxl.chart import BarChart, Reference, ScatterChart, Series
from openpyxl.chart.data_source import StrRef
from openpyxl.chart.layout import Layout, ManualLayout
from openpyxl.chart.series import SeriesLabel
from openpyxl.chart.text import RichText, Text
from openpyxl.chart.title import Title
from openpyxl.drawing.spreadsheet_drawing import AnchorMarker, TwoCellAnchor
from openpyxl.drawing.text import (
    CharacterProperties,
    Paragraph,
    ParagraphProperties,
    RegularTextRun,
)
from openpyxl.utils import get_column_letter

from .page import column_width

GIB_AXIS = '#,##0" GiB"'
COUNT_AXIS = "#,##0"
# Okabe-Ito: distinct for colour-blind readers and on a grey-scale printer
PALETTE = ("0072B2", "D55E00", "009E73", "E69F00", "CC79A7", "56B4E9", "000000", "999999",
           "F0E442")
# A ledger line has one colour on every chart (the device's and each rank's).
LINE_COLOURS = {"weights": "0072B2", "weight_metadata": "56B4E9", "runtime_peak": "009E73",
                "kv_cache": "E69F00", "kv_pool_spare": "F0E442", "safety": "CC79A7",
                "non_torch": "999999", "comm_buffers": "D55E00", "rotary_cache": "000000",
                "encoder_weights": "DDCC77",
                "cuda_graphs": "882255", "indexer_cache": "332288", "state_cache": "117733",
                "lora_adapters": "AA4499", "eplb": "44AA99", "free_bytes": "D9D9D9"}


@dataclass(frozen=True)
class Block:
    """The cells a chart covers, 1-based and inclusive."""

    first_col: int
    first_row: int
    last_col: int
    last_row: int


def place(ws, chart, block: Block) -> None:
    """Anchor the chart to its cells: it moves and sizes with them and never leaves them."""
    chart.anchor = TwoCellAnchor(
        _from=AnchorMarker(col=block.first_col - 1, row=block.first_row - 1),
        to=AnchorMarker(col=block.last_col, row=block.last_row))
    ws.add_chart(chart)


def _titles(chart, title: str, x_title: str, y_title: str) -> None:
    chart.title = _text(title, TITLE_POINTS)
    chart.x_axis.title = _text(x_title, AXIS_POINTS) if x_title else None
    chart.y_axis.title = _text(y_title, AXIS_POINTS) if y_title else None
    chart.legend.position = "b"
    chart.x_axis.delete = chart.y_axis.delete = False  # LibreOffice hides unset axes
    chart.plot_area.layout = Layout(ManualLayout(x=0.1, y=0.12, w=0.86, h=0.6))


TITLE_POINTS, AXIS_POINTS = 12, 10  # a chart's title no louder than the sheet it stands on


def _text(text: str, points: int) -> Title:
    props = CharacterProperties(sz=points * 100, b=True)
    run = RegularTextRun(rPr=props, t=text)
    return Title(tx=Text(rich=RichText(p=[Paragraph(pPr=ParagraphProperties(defRPr=props),
                                                     r=[run])])), overlay=False)


def colour(series, index: int, dashed: bool = False, marker: bool = True) -> None:
    """The palette's index-th colour on the series' line and markers."""
    rgb = PALETTE[index % len(PALETTE)]
    line = series.graphicalProperties.line
    line.solidFill, line.width = rgb, 22225  # 1.75 pt
    if dashed:
        line.dashStyle = "dash"
    series.marker.symbol = "circle" if marker else "none"
    if marker:
        series.marker.size = 5
        series.marker.graphicalProperties.solidFill = rgb
        series.marker.graphicalProperties.line.solidFill = rgb
    series.smooth = False


def memory_breakdown(ws, first_row: int, last_row: int, label_col: int, first_col: int,
                     last_col: int, header_row: int, block: Block, title: str,
                     keys: Sequence[str] = (), also_rows: Sequence[int] = ()) -> Block:
    """A stacked column per device/rank (categories: the header row; none for one column),
    one series per ledger line (rows first_row..last_row, then also_rows, in GiB; titles from
    label_col; `keys` the lines' keys, for their colours). The chart covers `block`, taken
    further down where its legend needs the rows (their set heights counted); that block is
    returned."""
    chart = BarChart()
    chart.type, chart.grouping, chart.overlap = "col", "stacked", 100
    chart.gapWidth = 60
    for index, row in enumerate([*range(first_row, last_row + 1), *also_rows]):
        data = Reference(ws, min_col=first_col, max_col=last_col, min_row=row, max_row=row)
        chart.add_data(data, from_rows=True, titles_from_data=False)
        series = chart.series[-1]
        series.tx = _title(ws, row, label_col)
        key = keys[index] if index < len(keys) else ""
        series.graphicalProperties.solidFill = LINE_COLOURS.get(key, PALETTE[index % 9])
        series.graphicalProperties.line.solidFill = "FFFFFF"
    chart.set_categories(Reference(ws, min_col=first_col, max_col=last_col, min_row=header_row,
                                   max_row=header_row))
    chart.y_axis.number_format = GIB_AXIS
    _titles(chart, title, "", "memory [GiB]")
    names = [str(ws.cell(row=row, column=label_col).value or "")
             for row in [*range(first_row, last_row + 1), *also_rows]]
    legend = legend_points(names, _width_pt(ws, block.first_col, block.last_col))
    block = Block(block.first_col, block.first_row, block.last_col,
                  _rows_for(ws, block.first_row, FRAME_PT + PLOT_MIN_PT + legend,
                            block.last_row))
    _legend_room(ws, chart, block, legend)
    if first_col == last_col:  # one column: its header names the unit, not a device
        chart.x_axis.delete = True
    place(ws, chart, block)
    return block


# A legend LibreOffice cannot fit below the plot is drawn as one overprinted line: the
# breakdown's legend is set small, and its chart is made tall enough for every entry.
LEGEND_POINTS = 8
LEGEND_LINE_PT, LEGEND_CHAR_PT, LEGEND_KEY_PT = 11.0, 4.3, 18.0  # at 8 pt, as LibreOffice sets it
FRAME_PT, PLOT_MIN_PT = 60.0, 160.0  # title, axis labels and margins; the smallest legible plot
DEFAULT_ROW_PT = 15.0


def legend_points(names: Sequence[str], width_pt: float) -> float:
    """The height a bottom legend of `names` takes in a chart `width_pt` wide: as many columns
    as the longest entry allows, a line per entry in each."""
    widest = max((len(name) for name in names), default=0) * LEGEND_CHAR_PT + LEGEND_KEY_PT
    columns = max(1, int((width_pt - 20) // widest))
    return math.ceil(len(names) / columns) * LEGEND_LINE_PT + 10


def _rows_for(ws, first_row: int, points: float, at_least: int) -> int:
    """The last row of a block starting at first_row that is `points` tall (and ends at
    `at_least` or later), counting the rows' set heights."""
    row, total = first_row, 0.0
    while True:
        total += _row_pt(ws, row)
        if total >= points and row >= at_least:
            return row
        row += 1


def _row_pt(ws, row: int) -> float:
    return ws.row_dimensions[row].height or DEFAULT_ROW_PT


def _width_pt(ws, first_col: int, last_col: int) -> float:
    return sum(column_width(ws, col) * 7.0 * 0.75 for col in range(first_col, last_col + 1))


def _legend_room(ws, chart, block: Block, legend: float) -> None:
    """Small legend text, and the plot area above the legend's height (a fraction of the block
    the rows' set heights give)."""
    size = CharacterProperties(sz=LEGEND_POINTS * 100)
    chart.legend.txPr = RichText(p=[Paragraph(pPr=ParagraphProperties(defRPr=size),
                                              endParaRPr=size)])
    total = sum(_row_pt(ws, row) for row in range(block.first_row, block.last_row + 1))
    plot = max(total - legend - FRAME_PT, 0.3 * total)
    chart.plot_area.layout = Layout(ManualLayout(x=0.1, y=0.12, w=0.86, h=min(plot / total, 0.7)))


def _title(ws, row: int, col: int) -> SeriesLabel:
    return SeriesLabel(strRef=StrRef(f"'{ws.title}'!${get_column_letter(col)}${row}"))


@dataclass(frozen=True)
class Line:
    """One series: y in rows first_row..last_row of y_col over x in x_col, titled by the cell
    (title_row, y_col); `colour_index` picks the palette colour, `dashed` for a target line."""

    x_col: int
    y_col: int
    first_row: int
    last_row: int
    title_row: int
    colour_index: int
    dashed: bool = False
    marker: bool = True


@dataclass(frozen=True)
class Axes:
    title: str
    x_title: str
    y_title: str
    x_values: Sequence[float] = ()  # the values plotted, to choose linear or log axes
    y_values: Sequence[float] = ()
    x_format: str = "General"
    y_format: str = COUNT_AXIS


def xy_lines(ws, lines: Sequence[Line], axes: Axes, block: Block) -> ScatterChart:
    """Lines over a numeric x: a context or a rate keeps its real spacing. An axis whose
    positive values span a decade or more is logarithmic (a 1/context ceiling is then a
    straight line instead of an L that hides every long context at zero)."""
    chart = ScatterChart()
    chart.scatterStyle = "lineMarker"
    for line in lines:
        ys = Reference(ws, min_col=line.y_col, min_row=line.first_row, max_row=line.last_row)
        xs = Reference(ws, min_col=line.x_col, min_row=line.first_row, max_row=line.last_row)
        series = Series(ys, xs)
        series.tx = _title(ws, line.title_row, line.y_col)
        colour(series, line.colour_index, line.dashed, line.marker)
        chart.series.append(series)
    _titles(chart, axes.title, axes.x_title, axes.y_title)
    _log_if_decades(chart.x_axis, axes.x_values)
    _log_if_decades(chart.y_axis, axes.y_values)
    if axes.y_format == COUNT_AXIS:
        _whole_steps(chart.y_axis, axes.y_values)
    chart.x_axis.number_format, chart.y_axis.number_format = axes.x_format, axes.y_format
    chart.x_axis.majorTickMark = chart.y_axis.majorTickMark = "out"
    place(ws, chart, block)
    return chart


def _log_if_decades(axis, values: Sequence[float]) -> None:
    positive = [v for v in values if isinstance(v, int | float) and v > 0]
    if not positive or max(positive) < 10 * min(positive):
        return
    axis.scaling.logBase = 10
    # from a power of ten (the ticks fall on powers of ten from the minimum) to the 1-2-5
    # step above the data: the axis ends near its data, not a decade past it
    axis.scaling.min = 10 ** math.floor(math.log10(min(positive)))
    top = max(positive)
    decade = 10 ** math.floor(math.log10(top))
    axis.scaling.max = decade * min(step for step in (1, 2, 5, 10) if step * decade >= top)


def _whole_steps(axis, values: Sequence[float]) -> None:
    """A linear count axis over a few units (every ceiling 0, or 0 to 3) steps by one from 0:
    its own step of 0.5 printed whole read '0, 1, 1'."""
    numbers = [v for v in values if isinstance(v, int | float)]
    top = max(numbers, default=0)
    if axis.scaling.logBase is None and top < SMALL_COUNT:
        axis.majorUnit = 1
        axis.scaling.min, axis.scaling.max = 0, max(1, math.ceil(top))


SMALL_COUNT = 5


def block_below(ws, row: int, first_col: int, width_chars: float, height_rows: int,
                height_points: float | None = None) -> Block:
    """The cells from (row, first_col) rightwards until `width_chars` of column width, and
    `height_rows` rows down; with height_points, the rows down that are that tall (their set
    heights: rows it shares with a table beside it may be taller than the default)."""
    last, total = first_col, 0.0
    while True:
        total += column_width(ws, last)
        if total >= width_chars:
            break
        last += 1
    if height_points is not None:
        end, total = row, _row_pt(ws, row)
        while total + _row_pt(ws, end + 1) <= height_points:
            end += 1
            total += _row_pt(ws, end)
        return Block(first_col, row, last, end)
    return Block(first_col, row, last, row + height_rows - 1)
