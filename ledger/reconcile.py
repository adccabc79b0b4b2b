"""Predicted vs logged: each vLLM startup figure beside the plan's, its residual and advice."""

import re
from dataclasses import dataclass

from .errors import SpecError
from .plan import Plan
from .units import GiB
from .vllm_log import LogFacts

ROUNDING_GIB = 0.01  # vLLM prints GiB with two decimals
DIFFERENT_MODEL = 0.10  # block bytes more than 10% apart: not this model's KV cache
WEIGHTS_APART = 0.5  # weights 1.5x apart either way: not this checkpoint


@dataclass(frozen=True)
class Row:
    """One compared figure. unit: 'GiB' (values in bytes), 'blocks', 'tokens' or 'x'."""

    key: str
    label: str
    unit: str
    predicted: float
    logged: float
    advice: str

    @property
    def residual(self) -> float:
        """logged - predicted, in the row's unit (bytes for GiB rows)."""
        return self.logged - self.predicted


@dataclass(frozen=True)
class Reconciliation:
    model: str
    engine_version: str
    rows: tuple[Row, ...]
    notes: tuple[str, ...]


def check_same_model(plan: Plan, facts: LogFacts, model_name: str) -> None:
    """Fail when the log names another model, or its KV blocks are another model's size."""
    if facts.model and not _same_name(facts.model, model_name):
        raise SpecError("--model", model_name, f"the log is for a different model: it loads "
                        f"{facts.model!r}")
    logged = facts.gib_bytes("weights_gib")
    predicted = plan.line("weights") + plan.line("weight_metadata")
    if logged and not 1 / (1 + WEIGHTS_APART) < logged / predicted < 1 + WEIGHTS_APART:
        raise SpecError("--model", model_name, f"the log is for a different model (or weight "
                        f"dtype or tp): it loads {facts.weights_gib} GiB of weights, the plan "
                        f"{predicted / GiB:.2f} GiB")
    implied = _implied_block_bytes(plan, facts)
    ours = plan.budget.block_bytes
    if implied and abs(implied / ours - 1) > DIFFERENT_MODEL:
        raise SpecError("--model", model_name, f"the log is for a different model (or KV dtype, "
                        f"block size or tp): its KV pool holds {implied:,.0f} B per block, "
                        f"{model_name} needs {ours:,} B")


AFTER_POOL_GRAPHS = ("the log's 'Graph capturing finished ... took {gib} GiB' comes after the "
                     "KV pool was sized: those graphs use the headroom (1 - "
                     "gpu_memory_utilization), not the pool, so do not declare them as "
                     "--cuda-graph-memory (only vLLM >= 0.19's 'Estimated CUDA graph memory' "
                     "is taken out of the pool)")

def reconcile(plan: Plan, replanned: Plan, facts: LogFacts) -> Reconciliation:
    """Rows for every figure the log printed. `plan` is the prediction from the config alone;
    `replanned` uses the log's own weights, activation and non-torch lines as measured, so its
    pool residual isolates servecap's arithmetic from its estimates."""
    rows = [r for r in (_weights(plan, facts), _gib_row(plan, facts, "activation_peak_gib",
                                                        "runtime_peak", "activation peak"),
                        _gib_row(plan, facts, "non_torch_gib", "non_torch", "non-torch memory"),
                        _gib_row(plan, facts, "cuda_graph_gib", "cuda_graphs", "CUDA graph pool"),
                        _pool(plan, facts), _replanned(replanned, facts))
            if r is not None]
    rows += _blocks(plan, facts)
    notes = [f"GiB figures in the log are rounded to {ROUNDING_GIB} GiB; residuals within that "
             "are matches"]
    if facts.graph_capture_gib is not None and facts.cuda_graph_gib is None:
        notes.append(AFTER_POOL_GRAPHS.format(gib=facts.graph_capture_gib))
    implied = _implied_block_bytes(plan, facts)
    if implied and implied > plan.budget.block_bytes * 1.005:
        extra = implied / plan.budget.block_bytes - 1
        notes.append(f"the log's blocks hold {extra:.1%} more bytes than {plan.model}'s: more "
                     "layers share the pool than the config has (a draft model's, e.g. EAGLE)")
    return Reconciliation(plan.model, facts.engine_version, tuple(rows), tuple(notes))


def _weights(plan: Plan, facts: LogFacts) -> Row | None:
    logged = facts.gib_bytes("weights_gib")
    if logged is None:
        return None
    predicted = plan.line("weights") + plan.line("weight_metadata") + plan.line("rotary_cache")
    gap = (logged - predicted) / GiB
    if abs(gap) <= ROUNDING_GIB:
        advice = "matches"
    elif gap > 0:
        advice = (f"weights in the log are {gap:.2f} GiB above the plan: the checkpoint carries "
                  "tensors the config does not describe (unquantized modules, extra layers, "
                  f"padding); plan with --weights {facts.weights_gib}GiB")
    else:
        advice = (f"weights in the log are {-gap:.2f} GiB below the plan: the checkpoint is "
                  "smaller than this dtype implies (quantized or tied?); check --weight-dtype "
                  f"or plan with --weights {facts.weights_gib}GiB")
    return Row("weights", "weights", "GiB", predicted, logged, advice)


def _gib_row(plan: Plan, facts: LogFacts, attr: str, key: str, label: str) -> Row | None:
    value = getattr(facts, attr)
    if value is None:
        return None
    logged, predicted = round(value * GiB), plan.line(key)
    flag = {"runtime_peak": "--runtime-peak", "non_torch": "--non-torch",
            "cuda_graphs": "--cuda-graph-memory"}[key]
    advice = "matches" if abs(logged - predicted) / GiB <= ROUNDING_GIB else (
        f"the plan's {label} is an estimate {abs(logged - predicted) / GiB:.2f} GiB "
        f"{'below' if logged > predicted else 'above'} the log: declare {flag} {value}GiB"
        + (" (the profile pass runs --max-num-batched-tokens tokens)"
           if key == "runtime_peak" else ""))
    return Row(key, label, "GiB", predicted, logged, advice)


def _replanned(plan: Plan, facts: LogFacts) -> Row | None:
    """Only meaningful when the log printed the lines the pool is made of."""
    printed = facts.weights_gib is not None and (facts.non_torch_gib is not None or
                                                 facts.activation_peak_gib is not None)
    return _pool(plan, facts, replanned=True) if printed else None


def _pool(plan: Plan, facts: LogFacts, replanned: bool = False) -> Row | None:
    logged = facts.gib_bytes("kv_pool_gib")
    if logged is None:
        return None
    predicted = plan.budget.kv_pool_bytes
    gap = (logged - predicted) / GiB
    if replanned:
        advice = ("servecap's arithmetic matches vLLM's" if abs(gap) <= 2 * ROUNDING_GIB else
                  f"{gap:+.2f} GiB left after the logged lines: check --device "
                  "(total_gpu_memory) and --gpu-memory-utilization")
        return Row("kv_pool_replanned", "KV pool from the logged lines", "GiB", predicted,
                   logged, advice)
    advice = "matches" if abs(gap) <= ROUNDING_GIB else (
        f"the pool is {abs(gap):.2f} GiB {'larger' if gap > 0 else 'smaller'} than planned: "
        + _pool_advice(facts))
    return Row("kv_pool", "KV pool", "GiB", predicted, logged, advice)


def _pool_advice(facts: LogFacts) -> str:
    """Point to the logged lines that can be declared, or say that none were logged."""
    flags = [flag for attr, flag in (("weights_gib", "--weights"),
                                     ("activation_peak_gib", "--runtime-peak"),
                                     ("non_torch_gib", "--non-torch")) if getattr(facts, attr)
             is not None]
    if flags:
        return "it follows the lines above; declare their logged values (" + \
            ", ".join(flags) + ")"
    return ("this log prints none of the lines the pool is made of (weights, activation peak, "
            "non-torch): measure them (servecap verify) or check --device and "
            "--gpu-memory-utilization")


def _blocks(plan: Plan, facts: LogFacts) -> list[Row]:
    budget = plan.budget
    rows = [_blocks_row(plan, facts)] if _logged_blocks(plan, facts) is not None else []
    if facts.kv_cache_tokens is not None:
        rows.append(Row("kv_cache_tokens", "GPU KV cache size (tokens)", "tokens",
                        budget.kv_cache_tokens, facts.kv_cache_tokens,
                        "matches" if budget.kv_cache_tokens == facts.kv_cache_tokens else
                        "follows the blocks"))
    if facts.max_concurrency is not None:
        same = f"{budget.max_concurrency:.2f}" == f"{facts.max_concurrency:.2f}"
        rows.append(Row("max_concurrency", "maximum concurrency", "x", budget.max_concurrency,
                        facts.max_concurrency, "matches" if same else "follows the blocks"))
    return rows


def _blocks_row(plan: Plan, facts: LogFacts) -> Row:
    """Blocks, and whether the logged pool (+-half its rounding) holds the logged count of
    this model's blocks: the check, to the block, that the page size is vLLM's."""
    budget, logged = plan.budget, _logged_blocks(plan, facts)
    advice = "matches" if budget.num_gpu_blocks == logged else "follows the pool's residual"
    if facts.kv_pool_gib is not None:
        lo = round((facts.kv_pool_gib - ROUNDING_GIB / 2) * GiB) // budget.block_bytes
        hi = round((facts.kv_pool_gib + ROUNDING_GIB / 2) * GiB) // budget.block_bytes
        advice += (f"; the logged pool gives {lo:,}-{hi:,} blocks of {budget.block_bytes:,} B"
                   + (", the logged count among them" if lo <= logged <= hi else
                      ": the logged count is outside (another KV layout?)"))
    return Row("num_gpu_blocks", "GPU blocks", "blocks", budget.num_gpu_blocks, logged, advice)


def _logged_blocks(plan: Plan, facts: LogFacts) -> int | None:
    """V0 prints the blocks; V1 prints tokens = blocks // groups x block_size."""
    if facts.num_gpu_blocks is not None:
        return facts.num_gpu_blocks
    if facts.kv_cache_tokens is None:
        return None
    return facts.kv_cache_tokens // plan.budget.block_size_tokens * plan.budget.num_groups


def _implied_block_bytes(plan: Plan, facts: LogFacts) -> float | None:
    blocks = _logged_blocks(plan, facts)
    if not blocks or facts.kv_pool_gib is None:
        return None
    return facts.kv_pool_gib * GiB / blocks


def _same_name(logged: str, model_name: str) -> bool:
    def norm(name: str) -> str:
        base = name.rstrip("/").rsplit("/", 1)[-1].lower()
        return re.sub(r"-(instruct|chat|hf|base|it)$", "", base)
    a, b = norm(logged), norm(model_name)
    return a in b or b in a
