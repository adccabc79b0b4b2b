"""Output files written whole or not at all: a temp file beside the target, then one rename."""

import json
import os
import sys
import tempfile
from pathlib import Path

from servecap.ledger.errors import SpecError


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
    handle, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(data, out, indent=2, allow_nan=False)
        publish(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return announce(path)


def announce(path: Path) -> Path:
    """'wrote FILE' on stderr, so a --json stdout stays one object."""
    print(f"wrote {path}", file=sys.stderr)
    return path
