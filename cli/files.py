"""Output files written whole or not at all: a temp file beside the target, then one rename
(model_configs/writing.py: removed on failure and SIGTERM, a dead writer's cleaned up)."""

import csv
import json
import os
import sys
from pathlib import Path

from servecap.ledger.errors import SpecError
from servecap.model_configs.writing import temp_beside


def check_new(path: Path | None, force: bool, field: str) -> None:
    """Every output file follows one rule: an existing file is replaced only with --force."""
    if path is not None and Path(path).exists() and not force:
        raise SpecError(field, str(path), "file exists; pass --force to replace it")


def csv_text(value: object) -> object:
    """A text field that a spreadsheet would run as a formula ('=', '+', '-', '@', tab, CR
    first) gets a leading apostrophe, so a name from a workload stays text (OWASP CSV
    injection); numbers pass unchanged."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def publish(tmp: str | Path, path: Path) -> None:
    """Give the finished temporary file the mode a new file gets under the umask (mkstemp
    makes it 0600, which a colleague cannot read), then rename it over the target."""
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(tmp, 0o666 & ~mask)
    os.replace(tmp, path)


def write_json(path: Path, data: dict, field: str = "--calibration-out",
               force: bool = False) -> Path:
    """Never a half-written file: the folder must exist; the rename replaces in one step."""
    path = Path(path)
    if not path.parent.is_dir():
        raise SpecError(field, str(path), "its folder does not exist")
    check_new(path, force, field)
    with temp_beside(path) as (handle, tmp):
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(data, out, indent=2, allow_nan=False)
        publish(tmp, path)
    return announce(path)


def announce(path: Path) -> Path:
    """'wrote FILE' on stderr, so a --json stdout stays one object."""
    print(f"wrote {path}", file=sys.stderr)
    return path


def check_writable(path: Path, field: str) -> None:
    """Fail before simulating when the output file could not be written."""
    if path.is_dir():
        raise SpecError(field, str(path), "a file path, not a folder")
    if not path.resolve().parent.is_dir():
        raise SpecError(field, str(path), "its folder does not exist")


def refuse_inputs(outputs: dict, inputs) -> None:
    """No output file may be one of the run's inputs (it would be replaced)."""
    read = {Path(p).resolve() for p in inputs if p is not None}
    for field, path in outputs.items():
        if path is not None and Path(path).resolve() in read:
            raise SpecError(field, str(path), "is an input of this run; write elsewhere")


def check_output_files(outputs: dict, inputs, force: bool) -> None:
    """Before anything runs: no output is an input, each can be written, and an existing one
    is replaced only with --force (the --xlsx rule, for every output)."""
    refuse_inputs(outputs, inputs)
    for field, path in outputs.items():
        if path is not None:
            check_writable(Path(path), field)
            check_new(path, force, field)


def write_csv(path: Path, columns: tuple[str, ...], rows, field: str = "--records") -> None:
    """Written to a temporary file beside the target and renamed: never half a file."""
    check_writable(path, field)
    try:
        with temp_beside(path.resolve()) as (fd, tmp):
            with os.fdopen(fd, "w", newline="", encoding="utf-8") as handle:
                writer = csv.DictWriter(handle, fieldnames=columns)
                writer.writeheader()
                writer.writerows({k: csv_text(v) for k, v in row.items()} for row in rows)
            publish(tmp, path)
    except OSError as exc:
        raise SpecError(field, str(path), f"cannot be written ({exc.strerror})") from None
    announce(path)
