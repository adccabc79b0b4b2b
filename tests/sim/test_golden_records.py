"""The same seed gives the same records, byte for byte, on every policy and every engine
feature, as the simulator did before its core was rewritten for speed (digests generated from
commit 5e9ed81, tests/sim/golden/digests.json), through the kernel this install runs (compiled
where the build made it) and through its source run as Python."""

import json
import sys
from pathlib import Path

import pytest

from servecap.sim import core

sys.path.insert(0, str(Path(__file__).parent / "golden"))
from cases import POLICIES, cases, digest  # noqa: E402

DIGESTS = json.loads((Path(__file__).parent / "golden" / "digests.json").read_text())
CASES = cases()


def test_every_case_has_a_digest():
    assert set(CASES) == set(DIGESTS["digests"])


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_bytes_as_before(name):
    assert digest(CASES[name], name in POLICIES) == DIGESTS["digests"][name], name


@pytest.mark.parametrize("name", ["chunked-prefill", "continuous-swap", "decode-priority-full",
                                  "replicas-least-tokens", "chunked-prefill-jitter",
                                  "continuous-spec", "continuous-steady"])
def test_pure_python_kernel_gives_the_same_bytes(name, monkeypatch):
    """Whichever kernel this install built, the source run as Python gives the same bytes."""
    monkeypatch.setattr(core, "COMPILED", None)
    assert digest(CASES[name], name in POLICIES) == DIGESTS["digests"][name], name


def test_a_stale_build_is_not_run(monkeypatch, tmp_path):
    """A compiled kernel stamped with another source's digest is left unused."""
    monkeypatch.setattr(core, "source_digest", lambda: "edited since the build")
    assert core._compiled() is None
