"""The same seed gives the same records, byte for byte, on every policy and every engine
feature, as the simulator did before its core was rewritten for speed (digests generated from
commit 5e9ed81, tests/sim/golden/digests.json)."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "golden"))
from cases import POLICIES, cases, digest  # noqa: E402

DIGESTS = json.loads((Path(__file__).parent / "golden" / "digests.json").read_text())
CASES = cases()


def test_every_case_has_a_digest():
    assert set(CASES) == set(DIGESTS["digests"])


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_bytes_as_before(name):
    assert digest(CASES[name], name in POLICIES) == DIGESTS["digests"][name], name
