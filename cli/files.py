"""Output files written whole or not at all: a temp file beside the target, then one rename."""

import json
import os
import sys
import tempfile
from pathlib import Path

from servecap.ledger.errors import SpecError


def write_json(path: Path, data: dict, field: str = "--calibration-out") -> Path:
    """Never a half-written file: the folder must exist; the rename replaces in one step."""
    path = Path(path)
    if not path.parent.is_dir():
        raise SpecError(field, str(path), "its folder does not exist")
    handle, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(data, out, indent=2)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return announce(path)


def announce(path: Path) -> Path:
    """'wrote FILE' on stderr, so a --json stdout stays one object."""
    print(f"wrote {path}", file=sys.stderr)
    return path
