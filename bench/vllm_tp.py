"""The tensor-parallel view of bench/vllm_latency.py: every published vLLM run at TP > 1,
which all-reduce prices it (a measured table of ledger/collectives.py, or the ring estimate),
and the median and worst TPOT error, with the measured tables and without them.

    python bench/vllm_tp.py              # TP > 1 rows, then the TPOT summaries
    python bench/vllm_tp.py --json

The "estimate only" figures are the same runs with ledger/collectives.py's tables set aside,
the ring estimate pricing every all-reduce (the model before the tables). The last lines
compare the two published H100 TP 4 runs of the same kernels (vLLM PRs #24111 and #24532),
the spread of the measurement itself.
"""

import json
import statistics
import sys
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from vllm_latency import compare, load_cases, predict  # noqa: E402

from servecap.ledger import collectives  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@contextmanager
def estimate_only():
    """The ring estimate for every device: the measured tables set aside for the block."""
    saved = dict(collectives.TABLES)
    collectives.TABLES.clear()
    try:
        yield
    finally:
        collectives.TABLES.update(saved)


def rows_for(cases) -> list[dict]:
    rows = []
    for case in cases:
        priced = "measured" if collectives.table_for(case.group["gpu"]["device"],
                                                     case.group["tp"]) else "estimate"
        for row in compare(case, predict(case)):
            rows.append(row | {"tp": case.group["tp"], "all_reduce": priced})
    return rows


def tpot_summary(rows: list[dict]) -> dict:
    errs = [abs(r["error"]) for r in rows if r["family"] == "tpot"]
    return {"comparisons": len(errs), "median_abs_error": round(statistics.median(errs), 4),
            "max_abs_error": round(max(errs), 4)} if errs else {"comparisons": 0}


def spread() -> dict:
    """Largest relative difference per column between the two published H100 TP 4 tables."""
    sys.path.insert(0, str(ROOT / "tests" / "ledger"))
    from test_collectives import fixture_columns

    ours = fixture_columns(collectives.H100_TP4.fixture)
    other = fixture_columns("vllm_pr24532_h100_tp4.txt")
    return {col: round(max(abs(other[col][b] / ours[col][b] - 1)
                           for b in set(ours[col]) & set(other[col])), 4)
            for col in ("ca_1stage", "ca_2stage", "pynccl")}


def report() -> dict:
    cases = load_cases()
    tp_cases = [c for c in cases if c.group["tp"] > 1]
    measured = rows_for(tp_cases)
    every = rows_for(cases)
    with estimate_only():
        before_tp, before_all = rows_for(tp_cases), rows_for(cases)
    return {"rows": measured,
            "tpot_tp_gt_1": tpot_summary(measured), "tpot_all": tpot_summary(every),
            "estimate_only": {"rows": before_tp, "tpot_tp_gt_1": tpot_summary(before_tp),
                              "tpot_all": tpot_summary(before_all)},
            "h100_tp4_tables_spread": spread()}


def markdown(out: dict) -> str:
    before = {(r["fixture"], r["metric"]): r for r in out["estimate_only"]["rows"]}
    lines = ["| fixture | model / GPU / TP / version | load | metric | measured | predicted "
             "| error | all-reduce | estimate only |", "|---|---|---|---|---:|---:|---:|---|---:|"]
    for r in out["rows"]:
        old = before[(r["fixture"], r["metric"])]
        lines.append(f"| {r['fixture']} | {r['setup']} | {r['load']} | {r['metric']} | "
                     f"{r['measured']:g} | {r['predicted']:.4g} | {r['error']:+.1%} | "
                     f"{r['all_reduce']} | {old['error']:+.1%} |")
    lines.append("")
    for label, now, then in (("TPOT, TP > 1", out["tpot_tp_gt_1"],
                              out["estimate_only"]["tpot_tp_gt_1"]),
                             ("TPOT, every run", out["tpot_all"],
                              out["estimate_only"]["tpot_all"])):
        lines.append(f"{label}: {now['comparisons']} comparisons, median |error| "
                     f"{now['median_abs_error']:.1%}, worst {now['max_abs_error']:.1%} "
                     f"(estimate only: {then['median_abs_error']:.1%}, "
                     f"{then['max_abs_error']:.1%})")
    spread_text = ", ".join(f"{k} {v:.1%}" for k, v in out["h100_tp4_tables_spread"].items())
    lines.append(f"H100 TP 4, PR #24532 against PR #24111, largest difference: {spread_text}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    out = report()
    print(json.dumps(out, indent=1) if "--json" in argv else markdown(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
