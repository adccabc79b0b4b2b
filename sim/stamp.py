"""Whether a compiled kernel (servecap.sim._<name>_c, built by the package's build from
sim/<name>.py and its .pxd) may run: only when it was built from the very source installed
beside it. sim/core.py and sim/state.py pick their kernels by it; it imports nothing of the
simulator's, so either may call it while the other is still being imported."""

import hashlib
import importlib
import os
from pathlib import Path


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


def compiled(name: str, digest=None):
    """The compiled module, or None: not built, built from another source (an edit since
    the build: the edit runs, not the stale build), or SERVECAP_PURE_PYTHON=1 set. digest:
    the function that hashes the source (source_digest)."""
    if os.environ.get("SERVECAP_PURE_PYTHON") == "1":
        return None
    try:
        module = importlib.import_module(f"._{name}_c", __package__)
    except ImportError:
        return None
    try:
        current = (digest or source_digest)(name)
    except OSError:
        return None
    return module if getattr(module, "SOURCE_SHA256", None) == current else None
