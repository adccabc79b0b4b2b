"""The compiled decode-run kernel: sim/decode_run.py with the C types of sim/decode_run.pxd,
built by Cython as servecap.sim._decode_run_c and stamped with its source's sha256 (sim/core.py
runs it only when that matches the source beside it). Optional: without Cython or a C
compiler the package installs and runs the same source as Python."""

import hashlib
import shutil
from pathlib import Path

from setuptools import Extension, setup

ROOT = Path(__file__).resolve().parent
SOURCES = ("decode_run.py", "decode_run.pxd")  # sim/core.py hashes the same files
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
    digest = hashlib.sha256()
    for name in SOURCES:
        digest.update((ROOT / "sim" / name).read_bytes())
    source = (ROOT / "sim" / "decode_run.py").read_text()
    (stage / "_decode_run_c.py").write_text(
        f"{source}\nSOURCE_SHA256 = {digest.hexdigest()!r}\n")
    shutil.copyfile(ROOT / "sim" / "decode_run.pxd", stage / "_decode_run_c.pxd")
    ext = Extension("servecap.sim._decode_run_c", [str(STAGE / "_decode_run_c.py")],
                    extra_compile_args=["-O2", "-ffp-contract=off"], optional=True)
    return cythonize([ext], compiler_directives={"language_level": 3}, quiet=True)


setup(ext_modules=extensions())
