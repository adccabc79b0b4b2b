"""A Scenario's traffic as requests: a workload YAML, a CSV trace, or a fixed shape."""

import csv
import io
from pathlib import Path

from servecap.ledger.errors import SpecError, document_kind
from servecap.ledger.serve import DEFAULT_BLOCK_SIZE_TOKENS
from servecap.model_configs.reading import parse_yaml, read_text
from servecap.sim.sampling import Request, draw_requests
from servecap.sim.shape import fixed_shape, with_load
from servecap.sim.trace import parse_trace
from servecap.sim.workload import Workload, workload_from_dict

from .spec import Scenario

MAX_TRACE_BYTES = 2**30  # a million rows of a CSV trace fit well below


def requests(scenario: Scenario, block_size: int | None = None
             ) -> tuple[list[Request], Workload | None, str]:
    """The requests, the workload they were drawn from (None for a trace) and its name. A
    .jsonl trace (token ids, docs/prefix.md) carries its prefix groups, found at block_size
    (the plan's; None: --block-size, else vLLM's default)."""
    w = scenario.workload
    if w.input_len is not None or w.output_len is not None:
        workload = _fixed_shape(scenario)
        return draw_requests(workload), workload, workload.name
    if (w.file is None) == (w.trace is None):
        given = "both" if w.file is not None else None  # None reads "is missing"
        raise SpecError("--workload/--trace", given, "give exactly one: a workload YAML or a "
                        "CSV trace (or --input-len/--output-len for a fixed shape)")
    if w.trace is not None:
        if w.rate is not None or w.num_requests is not None:
            raise SpecError("--rate/--num-requests", w.rate or w.num_requests,
                            f"a trace ({w.trace}) carries its own arrivals: use a workload")
        if Path(w.trace).suffix == ".jsonl":
            from .prefix_trace import read_trace, replayed  # token ids: jsonl traces alone

            size = block_size or scenario.scheduler.block_size or DEFAULT_BLOCK_SIZE_TOKENS
            try:
                return replayed(read_trace(Path(w.trace)), size), None, str(w.trace)
            except SpecError as exc:
                raise (exc if exc.source else exc.at(str(w.trace))) from None
        text = read_file(Path(w.trace))
        try:
            return parse_trace(io.StringIO(text, newline="")), None, str(w.trace)
        except (SpecError, csv.Error) as exc:
            if isinstance(exc, csv.Error):
                raise SpecError("csv", str(exc), "a comma-separated file with the header "
                                "arrival_s,prompt_tokens,output_tokens").at(
                                    str(w.trace)) from None
            raise exc.at(str(w.trace)) from None
    workload = with_load(load_workload(Path(w.file)), w.rate, w.num_requests)
    return draw_requests(workload), workload, str(w.file)


def _fixed_shape(scenario: Scenario) -> Workload:
    w = scenario.workload
    if w.file is not None or w.trace is not None:
        raise SpecError("--input-len/--output-len", w.input_len or w.output_len,
                        "a fixed shape instead of --workload/--trace, not with one")
    if w.input_len is None or w.output_len is None:
        raise SpecError("--output-len" if w.output_len is None else "--input-len", None,
                        "give both --input-len and --output-len")
    return fixed_shape(w.input_len, w.output_len, w.num_requests, w.rate)


def load_workload(path: Path) -> Workload:
    """A workload YAML; every failure names the file."""
    try:
        data = parse_yaml(read_file(path))
    except SpecError as exc:
        raise exc.at(str(path)) from None
    if not isinstance(data, dict):
        raise SpecError("document", document_kind(data), "a workload is a mapping").at(str(path))
    try:
        return workload_from_dict(data)
    except SpecError as exc:
        raise exc.at(str(path)) from None


def read_file(path: Path) -> str:
    """The whole file as UTF-8 text; unreadable or binary files are one SpecError."""
    return read_text(path, MAX_TRACE_BYTES)
