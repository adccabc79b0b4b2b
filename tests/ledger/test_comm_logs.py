"""The collective-buffer term against what the real tensor- and pipeline-parallel vLLM logs print
of memory outside torch (bench/comm_logs.py, the table docs/reconcile.md shows): vLLM 0.19's
H100 logs (llm-d-planner's sweep) print the worker's init snapshot and the profile's non-torch
increase, and 43 of them run without parallelism on the same GPU and release."""

import importlib.util
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
_spec = importlib.util.spec_from_file_location("comm_logs", ROOT / "bench" / "comm_logs.py")
comm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(comm)

from servecap.ledger.devices import NVLINK  # noqa: E402
from servecap.ledger.units import GiB  # noqa: E402
from servecap.ledger.vllm_profile import COMM_PER_GPU_NVLINK, comm_estimate  # noqa: E402
from servecap.ledger.vllm_versions import row  # noqa: E402

EVERY = comm.cases()
ALONE = [c for c in EVERY if comm._ranks(c.meta) == (1, 1)]


def _group(kind: str) -> list:
    """The H100 vLLM 0.19.0 logs with tensor ('tp') or only pipeline ('pp') parallelism."""
    out = []
    for case in EVERY:
        tp, pp = comm._ranks(case.meta)
        if (case.meta["device"], case.meta.get("vllm_version")) != ("h100-80gb", "0.19.0"):
            continue
        if (kind == "tp" and tp > 1) or (kind == "pp" and tp == 1 and pp > 1):
            out.append(case)
    return out


def _tp1_medians(case) -> tuple[float, float]:
    base = [comm._figures(c) for c in comm._alike(case, ALONE)]
    return (statistics.median(b[0] for b in base if b[0] is not None),
            statistics.median(b[1] for b in base if b[1] is not None))


def test_the_set_has_tp1_tp_and_pp_logs_that_print_both_figures():
    tp, pp = _group("tp"), _group("pp")
    assert len(tp) >= 10 and len(pp) == 2
    assert len(comm._alike(tp[0], ALONE)) >= 40
    assert sum(comm._figures(c)[1] is not None for c in tp) >= 14


def test_communicators_are_built_before_the_snapshot_at_0_19():
    """Every parallel log's init snapshot holds about 1 GiB more than TP 1's (the CUDA context):
    NCCL's communicator, built before the snapshot from 0.11 (VllmRow.communicators_before_
    baseline), whichever the group."""
    assert row("0.19.0").communicators_before_baseline
    for case in _group("tp") + _group("pp"):
        init, _ = comm._figures(case)
        init0, _ = _tp1_medians(case)
        assert init is not None and init - init0 >= 0.9, case.name


def test_tensor_parallelism_over_nvlink_adds_the_planned_term_after_the_snapshot():
    """The profile counts 1.81-1.96 GiB more non-torch memory at TP 2 and 4 than at TP 1; the
    plan's NVLink term is the least of them, never more than vLLM counted."""
    increases = []
    for case in _group("tp"):
        _, profile = comm._figures(case)
        if profile is not None:
            increases.append(profile - _tp1_medians(case)[1])
    term = comm_estimate(2, 1, NVLINK, "", True)[0] / GiB
    assert term == COMM_PER_GPU_NVLINK / GiB
    assert min(increases) - 0.01 <= term <= min(increases) + 0.01
    assert max(increases) - term <= 0.2


def test_pipeline_stages_add_nothing_after_the_snapshot():
    """Between pipeline stages the profile runs no collective (each stage's dummy forward takes
    dummy intermediate tensors): its non-torch increase is below TP 1's, and the plan takes no
    collective buffers for a pipeline-only group from 0.11."""
    for case in _group("pp"):
        _, profile = comm._figures(case)
        assert profile is not None and profile < _tp1_medians(case)[1], case.name
        tp, pp = comm._ranks(case.meta)
        assert comm_estimate(tp, pp, "", "", row("0.19.0").communicators_before_baseline)[0] == 0
