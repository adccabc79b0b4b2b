"""Trace replay: a CSV with a header row `arrival_s,prompt_tokens,output_tokens`."""

import csv
import math
from collections.abc import Iterable

from servecap.ledger.errors import SpecError

from .sampling import Request
from .workload import MAX_NUM_REQUESTS

TRACE_COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens")


def parse_trace(lines: Iterable[str]) -> list[Request]:
    """Rows sorted by arrival; optional `tenant` and `priority` columns are read, any other
    column is ignored. SpecError names the row and column of the first bad value."""
    reader = csv.DictReader(lines)
    missing = [c for c in TRACE_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise SpecError("header", ",".join(reader.fieldnames or []),
                        f"missing column(s) {', '.join(missing)}; the header must name "
                        + ",".join(TRACE_COLUMNS))
    rows = []
    for row in reader:
        if len(rows) == MAX_NUM_REQUESTS:
            raise SpecError("rows", f"more than {MAX_NUM_REQUESTS:,}", "a run holds at most "
                            f"{MAX_NUM_REQUESTS:,} requests; split the trace")
        rows.append(_row(row, reader.line_num))
    if not rows:
        raise SpecError("rows", 0, "a trace needs at least one request row")
    rows.sort(key=lambda r: r[0])
    return [Request(i, t, p, o, tenant=n, priority=q) for i, (t, p, o, n, q) in enumerate(rows)]


def _row(row: dict, line: int) -> tuple:
    priority = _value(row, "priority", line, int, 0) if (row.get("priority") or "").strip() \
        else 0
    return (_value(row, "arrival_s", line, float, 0),
            _value(row, "prompt_tokens", line, int, 1),
            _value(row, "output_tokens", line, int, 1),
            (row.get("tenant") or "").strip() or None, priority)


def _value(row: dict, column: str, line: int, kind: type, minimum: int):
    text = (row.get(column) or "").strip()
    try:
        value = kind(text)
    except ValueError:
        value = None
    if value is None or not math.isfinite(value) or value < minimum:
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise SpecError(f"line {line}, {column}", shown,
                        f"a {'finite number' if kind is float else 'whole number'} >= {minimum}")
    return value
