"""What each tensor- or pipeline-parallel vLLM log in tests/fixtures/vllm_logs prints of the
memory outside torch, beside what servecap plans for it: the collective-buffer term
(ledger/vllm_profile.py comm_estimate, over the link ledger/devices.py tp_link gives) and the
non-torch estimate it sits beside.

    python bench/comm_logs.py

Columns, in GiB as the log prints them:
- init: the V1 worker's init snapshot (`worker init memory snapshot: ... non_torch_memory=`,
  a DEBUG line): the CUDA context plus, from 0.11, the communicators built before it;
- profile: the non-torch memory the profile counts inside the budget (V1's `non-torch forward
  increase memory`, V0's `non_torch_memory takes`), or, where a release prints only its
  `consumed memory (weights + non-torch)`, that less `Model loading took` (marked `c`: it also
  holds the torch memory kept since the snapshot);
- TP 1: the profile's figure on the logs of the same GPU and release without parallelism
  (median, and how many);
- plan: servecap's non-torch estimate + its collective-buffer term for the log's release, GPU
  and tensor-parallel size (the log's "Custom allreduce is disabled" reason states the link
  where it prints one, as in reconcile);
- KV: the KV error `python bench/vllm_logs.py` gives the log ('-' where it is not planned).

Under the table, for each GPU and release with logs at TP 1 as well: how far the parallel logs'
init snapshot and profile lie above the TP 1 logs' medians, tensor and pipeline parallel apart.
"""

import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from vllm_logs import cases, evaluate  # noqa: E402

from servecap.ledger.devices import PCIE, tp_link  # noqa: E402
from servecap.ledger.units import GiB  # noqa: E402
from servecap.ledger.vllm_log import parse_vllm_log  # noqa: E402
from servecap.ledger.vllm_profile import comm_estimate, non_torch_estimate  # noqa: E402
from servecap.ledger.vllm_versions import row  # noqa: E402

INIT = re.compile(r"worker init memory snapshot: .*?non_torch_memory=([0-9.]+)GiB")
CONSUMED = re.compile(r"Actual usage is ([0-9.]+) GiB for consumed memory \(weights \+ non-torch\)")


def _ranks(meta: dict) -> tuple[int, int]:
    flags = meta["flags"]
    return flags.get("tensor_parallel_size", 1), flags.get("pipeline_parallel_size", 1)


def _profile(text: str) -> str:
    facts = parse_vllm_log(text)
    if facts.non_torch_gib is not None:
        return f"{facts.non_torch_gib:.2f}"
    consumed = CONSUMED.search(text)
    if consumed and facts.weights_gib is not None:
        return f"{float(consumed[1]) - facts.weights_gib:.2f} c"
    return "-"


def _figures(case) -> tuple[float | None, float | None]:
    """(init snapshot, profile) non-torch GiB the log prints, None where it prints none."""
    text = case.log.read_text()
    init = INIT.search(text)
    return (float(init[1]) if init else None), parse_vllm_log(text).non_torch_gib


def _alike(case, alone: list) -> list:
    """The logs without parallelism of the same GPU and release."""
    return [c for c in alone if c.meta["device"] == case.meta["device"]
            and c.meta.get("vllm_version") == case.meta.get("vllm_version")]


def _median(values) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _tp1(case, alone: list) -> str:
    same = [v for v in (_figures(c)[1] for c in _alike(case, alone)) if v is not None]
    return f"{statistics.median(same):.2f} ({len(same)})" if same else "-"


def _span(values: list[float]) -> str:
    return f"{min(values):+.2f}" if min(values) == max(values) else \
        f"{min(values):+.2f} to {max(values):+.2f}"


def above_tp1(every: list, alone: list) -> list[str]:
    """For each GPU and release that has TP 1 logs: the parallel logs' init and profile
    figures less the TP 1 medians, tensor- and pipeline-parallel apart."""
    out, groups = [], {}
    for case in every:
        tp, pp = _ranks(case.meta)
        if tp * pp > 1 and _alike(case, alone):
            key = (case.meta["device"], case.meta.get("vllm_version"), "tp" if tp > 1 else "pp")
            groups.setdefault(key, []).append(case)
    for (device, version, kind), members in sorted(groups.items()):
        base = [_figures(c) for c in _alike(members[0], alone)]
        init0, prof0 = _median(b[0] for b in base), _median(b[1] for b in base)
        figures = [_figures(c) for c in members]
        inits = [f[0] - init0 for f in figures if f[0] is not None and init0 is not None]
        profs = [f[1] - prof0 for f in figures if f[1] is not None and prof0 is not None]
        if not inits and not profs:
            continue
        words = "tensor parallel" if kind == "tp" else "pipeline parallel only"
        logs = f"{len(members)} log" + ("s" if len(members) > 1 else "")
        out.append(f"- {device}, vLLM {version}, {words} ({logs}): init "
                   f"{_span(inits) if inits else '-'} GiB, profile "
                   f"{_span(profs) if profs else '-'} GiB against the TP 1 medians "
                   f"({init0 if init0 is not None else '-'} and "
                   f"{prof0 if prof0 is not None else '-'} GiB)")
    return out


def _plan(meta: dict, text: str, tp: int, pp: int) -> tuple[str, str]:
    """(link, 'non-torch + collectives' in GiB) as servecap plans the log's release and GPU."""
    version = meta.get("vllm_version") or parse_vllm_log(text).release
    if not version:
        return "-", "-"
    release = row(version)
    off = parse_vllm_log(text).allreduce_off
    link, why = tp_link(meta["device"], PCIE if off in ("no_p2p", "pcie") else None, tp)
    comm, _ = comm_estimate(tp, pp, link, why, release.communicators_before_baseline)
    non_torch, _ = non_torch_estimate(release)
    return link or "-", f"{non_torch / GiB:.2f} + {comm / GiB:.2f}"


def table() -> list[str]:
    every = cases()
    alone = [c for c in every if _ranks(c.meta) == (1, 1)]
    lines = ["| log | vLLM | GPU | tp x pp | link | init | profile | TP 1 | plan | KV |",
             "| --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for case in every:
        tp, pp = _ranks(case.meta)
        if tp * pp == 1:
            continue
        text = case.log.read_text()
        init = INIT.search(text)
        link, plan = _plan(case.meta, text, tp, pp)
        kv = evaluate(case).kv_residual if case.planned else "-"
        version = case.meta.get("vllm_version") or f"{parse_vllm_log(text).release} (log)"
        lines.append(f"| {case.name} | {version} | "
                     f"{case.meta['device']} | {tp} x {pp} | {link} | "
                     f"{init[1] if init else '-'} | {_profile(text)} | "
                     f"{_tp1(case, alone)} | {plan} | {kv} |")
    return lines + [""] + above_tp1(every, alone)


if __name__ == "__main__":
    print("\n".join(table()))
