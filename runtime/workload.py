"""The simulator's workload as engine arrivals: the same draws, prompts made of token ids.

Requests of one shared-prefix group start with the same prefix ids (so the prefix cache can
serve them, as the simulator assumes); the rest of each prompt is seeded by its request id.
"""

import random
from pathlib import Path

from servecap.ledger.errors import SpecError
from servecap.ledger.units import plural
from servecap.model_configs.reading import MAX_INPUT_BYTES, parse_yaml, read_text

from .sequence import Arrival

MAX_TRACE_BYTES = 2**30  # as simulate's --trace (cli/sim_inputs.py)


def load_arrivals(path: str | Path, vocab_size: int) -> tuple[tuple[Arrival, ...], str]:
    """Read a workload YAML with the simulator's validation and draw its requests; returns
    the arrivals and a one-line description for the benchmark record."""
    try:
        from servecap.sim.sampling import draw_requests
        from servecap.sim.workload import workload_from_dict
    except ImportError:
        raise SpecError("--workload", str(path), "needs the simulator (servecap.sim) in this "
                        "install to read workload files") from None
    data = _read_yaml(Path(path))
    try:
        workload = workload_from_dict(data)
    except SpecError as exc:
        raise exc.at(str(path)) from None
    requests = draw_requests(workload)
    name = (f"{workload.name} ({path}): {plural(len(requests), 'request')}, seed {workload.seed}, "
            f"arrivals {workload.arrivals.kind}")
    return arrivals_from_requests(requests, vocab_size, workload.seed), name


def load_trace(path: str | Path, vocab_size: int) -> tuple[tuple[Arrival, ...], str]:
    """A CSV trace read by the simulator's own reader (same columns, same errors); each row an
    Arrival at its arrival_s with seeded prompt ids."""
    import csv
    import io

    from servecap.sim.trace import parse_trace

    text = _read_text(Path(path), "--trace", MAX_TRACE_BYTES)
    try:
        requests = parse_trace(io.StringIO(text, newline=""))
    except csv.Error as exc:
        raise SpecError("csv", str(exc), "a comma-separated file with the header "
                        "arrival_s,prompt_tokens,output_tokens").at(str(path)) from None
    except SpecError as exc:
        raise exc.at(str(path)) from None
    return (arrivals_from_requests(requests, vocab_size, 0),
            f"trace {path}: {plural(len(requests), 'request')}")


def arrivals_from_requests(requests, vocab_size: int, seed: int) -> tuple[Arrival, ...]:
    """Each simulator request (arrival_s, prompt_tokens with prefix_tokens of prefix_group
    included, output_tokens) as an Arrival with explicit, deterministic token ids."""
    return tuple(Arrival(r.arrival_s, _prompt_ids(r, vocab_size, seed), r.output_tokens,
                         seed=seed + r.request_id) for r in requests)


def _prompt_ids(request, vocab_size: int, seed: int) -> tuple[int, ...]:
    prefix = _ids(f"{seed}:prefix:{request.prefix_group}", request.prefix_tokens, vocab_size)
    rest = _ids(f"{seed}:request:{request.request_id}",
                request.prompt_tokens - request.prefix_tokens, vocab_size)
    return prefix + rest


def _read_text(path: Path, field: str, max_bytes: int) -> str:
    """The file through the untrusted-input reader simulate and load use: a pipe, a device
    such as /dev/zero or an oversized file is refused before a byte is read."""
    if not path.exists():
        raise SpecError(field, str(path), "cannot be read (No such file or directory)")
    return read_text(path, max_bytes, field)


def _ids(key: str, count: int, vocab_size: int) -> tuple[int, ...]:
    rng = random.Random(key)
    return tuple(rng.randrange(vocab_size) for _ in range(count))


def _read_yaml(path: Path) -> dict:
    try:
        data = parse_yaml(_read_text(path, "--workload", MAX_INPUT_BYTES))
    except SpecError as exc:
        raise (exc if exc.field == "--workload" else exc.at(str(path))) from None
    if not isinstance(data, dict):
        raise SpecError("document", type(data).__name__, "a workload is a mapping").at(str(path))
    return data
