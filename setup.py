"""The compiled simulator kernels: each sim/<name>.py with the C types of sim/<name>.pxd,
built by Cython as servecap.sim._<name>_c and stamped with its source's sha256 (sim/core.py
runs one only when that matches the source beside it). Optional: without Cython or a C
compiler the package installs and runs the same sources as Python."""

import hashlib
import shutil
from pathlib import Path

from setuptools import Extension, setup

ROOT = Path(__file__).resolve().parent
# sim/core.py picks the same list (in this order: each cimports the ones before) and hashes
# the same files
KERNELS = ("seq", "kvpool", "engine", "policies", "decode_run", "loop", "draws")
STAGE = Path("build") / "cython" / "servecap" / "sim"


def extensions() -> list:
    try:
        from Cython.Build import cythonize
    except ImportError:
        return []
    stage = ROOT / STAGE
    stage.mkdir(parents=True, exist_ok=True)
    for package in (stage, stage.parent):
        (package / "__init__.py").write_text("")
    # the .pxd files give the C types; the sources' annotations are for readers (a Python
    # `int` or `bool` annotation would otherwise type the compiled argument as that exact type)
    return cythonize([_kernel(name, stage) for name in KERNELS],
                     compiler_directives={"language_level": 3, "annotation_typing": False},
                     quiet=True)


def _kernel(name: str, stage: Path) -> Extension:
    """sim/<name>.py staged as _<name>_c.py with its .pxd, its stamp appended."""
    digest = hashlib.sha256()
    for suffix in (".py", ".pxd"):
        digest.update((ROOT / "sim" / f"{name}{suffix}").read_bytes())
    source = (ROOT / "sim" / f"{name}.py").read_text()
    (stage / f"_{name}_c.py").write_text(f"{source}\nSOURCE_SHA256 = {digest.hexdigest()!r}\n")
    shutil.copyfile(ROOT / "sim" / f"{name}.pxd", stage / f"_{name}_c.pxd")
    return Extension(f"servecap.sim._{name}_c", [str(STAGE / f"_{name}_c.py")],
                     extra_compile_args=["-O2", "-ffp-contract=off"], optional=True)


setup(ext_modules=extensions())
