"""The same seed gives the same records, byte for byte, on every policy and every engine
feature, as the simulator did before its core was rewritten for speed (digests generated from
commit 5e9ed81, tests/sim/golden/digests.json), through the kernel this install runs (compiled
where the build made it) and through its source run as Python."""

import ast
import json
import sys
from pathlib import Path

import pytest

from servecap.sim import core, sampling
from servecap.sim import draws as draws_python

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
@pytest.mark.parametrize("python", [("COMPILED", "COMPILED_LOOP"), ("COMPILED",),
                                    ("COMPILED_LOOP",)])
def test_pure_python_kernel_gives_the_same_bytes(name, python, monkeypatch):
    """Whichever kernels this install built, their sources run as Python give the same bytes,
    each alone and both together."""
    for attribute in python:
        monkeypatch.setattr(core, attribute, None)
    assert digest(CASES[name], name in POLICIES) == DIGESTS["digests"][name], name


@pytest.mark.parametrize("name", ["chunked-prefill", "continuous-priority", "replicas-least-tokens",
                                  "continuous-steady"])
def test_the_draws_as_python_give_the_same_bytes(name, monkeypatch):
    """The request lists drawn by the draws kernel's source run as Python (whichever this
    install built): the same requests, so the same bytes."""
    monkeypatch.setattr(sampling, "DRAWS", draws_python)
    assert digest(cases()[name], name in POLICIES) == DIGESTS["digests"][name], name


@pytest.mark.parametrize("kernel", core.KERNELS)
def test_a_stale_build_is_not_run(kernel, monkeypatch):
    """A compiled kernel stamped with another source's digest is left unused."""
    monkeypatch.setattr(core, "source_digest", lambda name: "edited since the build")
    assert core._compiled(kernel) is None


def test_the_build_compiles_the_kernels_core_picks():
    """setup.py builds (and stamps) the very kernels sim/core.py looks for."""
    tree = ast.parse((Path(__file__).parents[2] / "setup.py").read_text())
    built = [ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
             and [t.id for t in node.targets if isinstance(t, ast.Name)] == ["KERNELS"]]
    assert built == [core.KERNELS]
