"""The workbook's charts, each series bound to cells: memory breakdown, ceiling envelope, latency
against offered load. Legends sit below the plot so long series names are never clipped."""

from openpyxl.chart import BarChart, LineChart, Reference
from openpyxl.chart.data_source import StrRef
from openpyxl.chart.layout import Layout, ManualLayout
from openpyxl.chart.series import SeriesLabel
from openpyxl.utils import get_column_letter

GIB_AXIS = '#,##0" GiB"'


def _place(chart, title: str, x_title: str, y_title: str, width: float = 22,
           height: float = 11) -> None:
    chart.title, chart.x_axis.title, chart.y_axis.title = title, x_title, y_title
    chart.width, chart.height = width, height
    chart.legend.position = "b"
    chart.x_axis.delete = chart.y_axis.delete = False  # LibreOffice hides unset axes
    chart.plot_area.layout = Layout(ManualLayout(x=0.08, y=0.1, w=0.88, h=0.62))


def memory_breakdown(ws, first_row: int, last_row: int, label_col: int, first_col: int,
                     last_col: int, header_row: int, anchor: str, title: str) -> None:
    """A stacked column per device/rank (categories: the header row), one series per ledger
    line (rows first_row..last_row, in GiB; titles from label_col)."""
    chart = BarChart()
    chart.type, chart.grouping, chart.overlap = "col", "stacked", 100
    for row in range(first_row, last_row + 1):
        data = Reference(ws, min_col=first_col, max_col=last_col, min_row=row, max_row=row)
        chart.add_data(data, from_rows=True, titles_from_data=False)
        chart.series[-1].tx = _title(ws, row, label_col)
    chart.set_categories(Reference(ws, min_col=first_col, max_col=last_col, min_row=header_row,
                                   max_row=header_row))
    chart.y_axis.number_format = GIB_AXIS
    chart.y_axis.majorGridlines = None
    _place(chart, title, "", "memory [GiB]", width=max(14, 4 + 2.2 * (last_col - first_col)))
    ws.add_chart(chart, anchor)


def _title(ws, row: int, col: int) -> SeriesLabel:
    return SeriesLabel(strRef=StrRef(f"'{ws.title}'!${get_column_letter(col)}${row}"))


def lines_by_column(ws, x_col: int, first_col: int, last_col: int, header_row: int,
                    last_row: int, anchor: str, title: str, x_title: str, y_title: str,
                    number_format: str | None = None) -> LineChart:
    """One line per column first_col..last_col (title in header_row) over x in x_col."""
    chart = LineChart()
    data = Reference(ws, min_col=first_col, max_col=last_col, min_row=header_row,
                     max_row=last_row)
    chart.add_data(data, titles_from_data=True)
    chart.set_categories(Reference(ws, min_col=x_col, min_row=header_row + 1, max_row=last_row))
    for series in chart.series:
        series.marker.symbol = "circle"
        series.smooth = False
    if number_format:
        chart.y_axis.number_format = number_format
    _place(chart, title, x_title, y_title)
    ws.add_chart(chart, anchor)
    return chart
