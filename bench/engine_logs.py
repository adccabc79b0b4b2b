"""Plan every real SGLang and TensorRT-LLM startup log in tests/fixtures/sglang_logs and
tests/fixtures/trtllm_logs from its model's config and the flags the log states, and compare
with the KV pool the engine allocated: the plan alone, and the pool planned from the memory
the log prints where the engine measures it (each logged figure replacing the plan's estimate:
ledger/engine_reconcile.py _arithmetic), which is what reconcile checks. The plan is
`servecap reconcile --engine sglang|trtllm`'s (scenario/engine_reconciliation.py
predict_engine), given the sidecar's GPU and flags.

    python bench/engine_logs.py            # the table (markdown) and the hit rates
    python bench/engine_logs.py --json     # one object per log

Each log has a sidecar <log>.json: source URL, engine and release, GPU, device, model, config (a
directory under tests/fixtures/configs, with a note where it is a same-architecture stand-in)
and the flags the log or its thread states; "miss" says why a log the plan misses by more than
10 % is missed (the test keeps it as an expected failure with that reason); "plan_miss" why the
plan alone, without the memory the log prints, misses where the logged memory reconciles it;
"residual" what a reconciled log leaves unexplained within the 10 %.
"""

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from servecap.cli.deploy import DeployFlags
from servecap.cli.inputs import PlanFlags, plan_scenario
from servecap.ledger.engine_reconcile import reconcile_engine
from servecap.ledger.units import GiB
from servecap.scenario.engine_reconciliation import predict_engine

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
CONFIGS = FIXTURES / "configs"
FOLDERS = ("sglang_logs", "trtllm_logs")
DEPLOY_KEYS = ("tensor_parallel_size", "mem_fraction_static", "free_gpu_memory_fraction",
               "max_tokens", "max_total_tokens", "nnodes")


@dataclass(frozen=True)
class Outcome:
    name: str
    meta: dict
    predicted_tokens: int
    logged_tokens: int | None
    from_lines: int | None  # the engine's rule on its own logged lines
    predicted_pool_gib: float
    logged_pool_gib: float | None

    @property
    def plan_error(self) -> float | None:
        """The plan from the config and flags alone, against the logged tokens."""
        if not self.logged_tokens:
            return None
        return (self.predicted_tokens - self.logged_tokens) / self.logged_tokens

    @property
    def error(self) -> float | None:
        """What reconcile checks: the pool planned from the memory the log prints where the
        engine measures it (a logged figure replacing the plan's estimate), else the plan's."""
        if not self.logged_tokens:
            return None
        predicted = self.predicted_tokens if self.from_lines is None else self.from_lines
        return (predicted - self.logged_tokens) / self.logged_tokens

    @property
    def capped(self) -> bool:
        """The pool the log allocated is SGLang's --max-total-tokens, not its memory rule."""
        cap = self.meta["flags"].get("max_total_tokens")
        return cap is not None and self.logged_tokens is not None and self.logged_tokens <= cap


def cases() -> list[tuple[Path, dict]]:
    return [(p.with_suffix(".log"), json.loads(p.read_text()))
            for folder in FOLDERS for p in sorted((FIXTURES / folder).glob("*.json"))]


def flags_for(meta: dict) -> tuple[str, PlanFlags, DeployFlags]:
    flags = meta["flags"]
    plan = PlanFlags(device=meta["device"], concurrency=1, kv_dtype=flags.get("kv_cache_dtype"),
                     weight_dtype=flags.get("weight_dtype"))
    deploy = DeployFlags(engine=meta["engine"], **{k: flags[k] for k in DEPLOY_KEYS
                                                   if k in flags})
    return str(CONFIGS / meta["config"]), plan, deploy


def evaluate(log: Path, meta: dict) -> Outcome:
    model, plan, deploy = flags_for(meta)
    found = predict_engine(log, plan_scenario(model, plan, deploy))
    budget, facts = found.planned.plan.budget, found.facts
    rows = {r.key: r for r in reconcile_engine(found.planned.plan, facts,
                                               fraction=found.fraction).rows}
    arithmetic = rows.get("kv_tokens_from_lines")
    return Outcome(log.stem, meta, budget.kv_cache_tokens, facts.kv_tokens,
                   None if arithmetic is None else int(arithmetic.predicted),
                   budget.num_gpu_blocks * budget.block_bytes / GiB, facts.pool_gib)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1%}"


def table(outcomes: list[Outcome]) -> list[str]:
    lines = ["| log | engine | model | GPU | KV tokens planned | logged | plan's error | from "
             "the logged memory | reconciled error | pool planned | pool logged |",
             "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for o in outcomes:
        m = o.meta
        logged = "-" if o.logged_tokens is None else f"{o.logged_tokens:,}"
        lines_rule = "-" if o.from_lines is None else f"{o.from_lines:,}"
        pool = "-" if o.logged_pool_gib is None else f"{o.logged_pool_gib:.2f} GiB"
        lines.append(f"| {o.name} | {m['engine']} {m['engine_version']} | {m['model']} | "
                     f"{m['gpu']} | {o.predicted_tokens:,} | {logged} | {_pct(o.plan_error)} | "
                     f"{lines_rule} | {_pct(o.error)} | {o.predicted_pool_gib:.2f} GiB | "
                     f"{pool} |")
    return lines


def summary(outcomes: list[Outcome]) -> list[str]:
    out = []
    for engine in ("sglang", "trtllm"):
        errors = [abs(o.error) for o in outcomes if o.meta["engine"] == engine
                  and o.error is not None]
        planned = [abs(o.plan_error) for o in outcomes if o.meta["engine"] == engine
                   and o.plan_error is not None]
        rule = [o for o in outcomes if o.meta["engine"] == engine and o.from_lines]
        exact = sum(abs(o.from_lines - o.logged_tokens) <= 0.01 * o.logged_tokens for o in rule)
        capped = sum(o.capped for o in outcomes if o.meta["engine"] == engine)
        out.append(f"{engine}: {len(errors)} logs; KV tokens reconciled (from the logged "
                   f"memory where printed) within 5%: {sum(e <= 0.05 for e in errors)}/"
                   f"{len(errors)}, within 10%: {sum(e <= 0.10 for e in errors)}/{len(errors)}; "
                   f"the plan alone within 10%: {sum(e <= 0.10 for e in planned)}/"
                   f"{len(planned)}; planned from the logged memory within 1%: "
                   f"{exact}/{len(rule)}" + (
                       f"; {capped} pools capped by --max-total-tokens (the cap and the weights "
                       "are what they check)" if capped else ""))
    return out + [_held_out(outcomes)]


def _held_out(outcomes: list[Outcome]) -> str:
    """The same KV rates on the logs whose sidecar says `held_out`: added after every rule and
    constant, fitted on by none."""
    parts = []
    for engine in ("sglang", "trtllm"):
        held = [o for o in outcomes if o.meta["engine"] == engine and o.meta.get("held_out")]
        errors = [abs(o.error) for o in held if o.error is not None]
        planned = [abs(o.plan_error) for o in held if o.plan_error is not None]
        parts.append(f"{engine} {len(held)} logs, reconciled within 5%: "
                     f"{sum(e <= 0.05 for e in errors)}/{len(errors)}, within 10%: "
                     f"{sum(e <= 0.10 for e in errors)}/{len(errors)}, the plan alone within "
                     f"10%: {sum(e <= 0.10 for e in planned)}/{len(planned)}")
    return "held out (fitted on by none): " + "; ".join(parts)


def main(argv: list[str]) -> int:
    outcomes = [evaluate(log, meta) for log, meta in cases()]
    if "--json" in argv:
        print(json.dumps([{"log": o.name, "engine": o.meta["engine"],
                           "kv_tokens_predicted": o.predicted_tokens,
                           "kv_tokens_logged": o.logged_tokens, "kv_error": o.error,
                           "plan_kv_error": o.plan_error,
                           "kv_tokens_from_logged_lines": o.from_lines} for o in outcomes],
                         indent=2))
        return 0
    print("\n".join(table(outcomes)))
    print()
    print("\n".join(summary(outcomes)))
    print("\n".join(f"miss, explained: {o.name}: {o.meta['miss']}" for o in outcomes
                     if o.meta.get("miss")))
    print("\n".join(f"the plan alone misses, the logged memory explains: {o.name}: "
                     f"{o.meta['plan_miss']}" for o in outcomes if o.meta.get("plan_miss")))
    print("\n".join(f"reconciled, what is left: {o.name}: {o.meta['residual']}"
                     for o in outcomes if o.meta.get("residual")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
