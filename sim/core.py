"""Which simulator kernels run: each compiled one (servecap.sim._<name>_c, built by the
package's build from sim/<name>.py and its .pxd) when it was built from the very source
installed beside it, else that source as plain Python. Both give the same bytes
(tests/sim/test_golden_records.py runs each). The kernels: decode_run (decode-only steps
between events) and loop (the scheduler loop that calls it)."""

import hashlib
import importlib
import os
from pathlib import Path

from . import decode_run as PYTHON  # the decode kernel's source, run where COMPILED is None
from . import loop as _loop_python

KERNELS = ("decode_run", "loop")  # setup.py builds the same list


def sources(name: str) -> tuple[str, str]:
    """A kernel's source and its C types, the files its stamp covers."""
    return f"{name}.py", f"{name}.pxd"


def source_digest(name: str = "decode_run") -> str:
    """sha256 over a kernel's source and its types, as the build stamps it."""
    here = Path(__file__).parent
    digest = hashlib.sha256()
    for file in sources(name):
        digest.update((here / file).read_bytes())
    return digest.hexdigest()


def _compiled(name: str = "decode_run"):
    """The compiled module, or None: not built, built from another source (an edit since
    the build: the edit runs, not the stale build), or SERVECAP_PURE_PYTHON=1 set."""
    if os.environ.get("SERVECAP_PURE_PYTHON") == "1":
        return None
    try:
        module = importlib.import_module(f"._{name}_c", __package__)
    except ImportError:
        return None
    try:
        current = source_digest(name)
    except OSError:
        return None
    return module if getattr(module, "SOURCE_SHA256", None) == current else None


COMPILED = _compiled("decode_run")
COMPILED_LOOP = _compiled("loop")


def decode_run(eng, horizon, max_steps) -> int:
    """decode_run.decode_run, compiled where the build made it."""
    return (COMPILED or PYTHON).decode_run(eng, horizon, max_steps)


def run_iterations(eng, horizon) -> None:
    """loop.run_iterations, compiled where the build made it."""
    (COMPILED_LOOP or _loop_python).run_iterations(eng, horizon)


def kernel() -> str:
    """Which kernels run, for a benchmark to say."""
    built = [name for name, module in (("decode", COMPILED), ("loop", COMPILED_LOOP))
             if module is not None]
    if len(built) == 2:
        return "compiled (Cython) decode and loop kernels"
    if not built:
        return "pure Python kernels"
    return f"compiled (Cython) {built[0]} kernel, the other as Python"
