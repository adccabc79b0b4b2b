"""Each compiled kernel runs only with the compiled classes it reads (sim/core.py): a stale
build of the request state or the block pool (its source edited since the build) leaves the
engine, the policies and the loop kernels that read them as Python too, and the run gives the
golden bytes. Run in a fresh interpreter, since the kernels are picked at import."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from servecap.sim import core

GOLDEN = Path(__file__).parent / "golden"
PROBE = """
import json, sys
sys.path.insert(0, {golden!r})
from servecap.sim import stamp
real = stamp.source_digest
stamp.source_digest = lambda name="decode_run": "edited since the build" \\
    if name == {stale!r} else real(name)
from servecap.sim import core, pool, state
from cases import POLICIES, cases, digest
name = "chunked-prefill"
print(json.dumps({{"engine": core.Engine.__module__, "seq": state.Seq.__module__,
                  "pool": pool.BlockPool.__module__,
                  "compiled": [k for k in ("COMPILED_ENGINE", "COMPILED_POLICIES", "COMPILED",
                                            "COMPILED_LOOP") if getattr(core, k) is not None],
                  "digest": digest(cases()[name], name in POLICIES)}}))
"""


@pytest.mark.skipif(core.COMPILED_LOOP is None, reason="the kernels are not built here")
@pytest.mark.parametrize("stale", ["seq", "kvpool"])
def test_a_stale_class_runs_its_readers_as_python(stale):
    out = subprocess.run([sys.executable, "-c", PROBE.format(golden=str(GOLDEN), stale=stale)],
                         capture_output=True, text=True, check=True, cwd="/")
    got = json.loads(out.stdout)
    assert got["compiled"] == []
    assert got["engine"] == "servecap.sim.engine"
    assert got[{"seq": "seq", "kvpool": "pool"}[stale]] == f"servecap.sim.{stale}"
    expected = json.loads((GOLDEN / "digests.json").read_text())["digests"]["chunked-prefill"]
    assert got["digest"] == expected
