"""Which decode-run kernel the simulator runs: the compiled one (servecap.sim._decode_run_c,
built by the package's build from sim/decode_run.py and its .pxd) when it was built from
the very source installed beside it, else that source as plain Python. Both give the same
bytes (tests/sim/test_golden_records.py runs each)."""

import hashlib
import os
from pathlib import Path

from . import decode_run as _python

SOURCES = ("decode_run.py", "decode_run.pxd")


def source_digest() -> str:
    """sha256 over the kernel's source and its types, as the build stamps it."""
    here = Path(__file__).parent
    digest = hashlib.sha256()
    for name in SOURCES:
        digest.update((here / name).read_bytes())
    return digest.hexdigest()


def _compiled():
    """The compiled module, or None: not built, built from another source (an edit since
    the build: the edit runs, not the stale build), or SERVECAP_PURE_PYTHON=1 set."""
    if os.environ.get("SERVECAP_PURE_PYTHON") == "1":
        return None
    try:
        from . import _decode_run_c as module
    except ImportError:
        return None
    try:
        current = source_digest()
    except OSError:
        return None
    return module if getattr(module, "SOURCE_SHA256", None) == current else None


COMPILED = _compiled()


def decode_run(eng, horizon, max_steps) -> int:
    """decode_run.decode_run, compiled where the build made it."""
    return (COMPILED or _python).decode_run(eng, horizon, max_steps)


def kernel() -> str:
    """Which kernel runs, for a benchmark to say."""
    return "compiled (Cython)" if COMPILED is not None else "pure Python"
