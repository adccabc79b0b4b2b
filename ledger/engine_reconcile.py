"""Predicted vs logged for SGLang and TensorRT-LLM: the weights, the free memory the budget is
taken of, the KV pool and its tokens, and the engine's own arithmetic redone from the logged
lines (each rule as its source states it)."""

from .engine_log import SGLANG, EngineLogFacts
from .plan import Plan
from .reconcile import AGREE, ROUNDING_GIB, Reconciliation, Row
from .units import GiB


def reconcile_engine(plan: Plan, facts: EngineLogFacts,
                     said: tuple[str, ...] = ()) -> Reconciliation:
    """Rows for every figure the log printed; agrees when the KV tokens (else the pool) are
    within AGREE."""
    rows = [r for r in (_weights(plan, facts), _free(plan, facts), _pool(plan, facts),
                        _tokens(plan, facts), _arithmetic(plan, facts)) if r is not None]
    notes = [f"{facts.engine} prints GiB with two decimals ('GB' in SGLang's lines): residuals "
             f"within {ROUNDING_GIB} GiB are matches"] + [n for n in said if n]
    kv = next((r for r in rows if r.key == "kv_cache_tokens"), None) or next(
        (r for r in rows if r.key == "kv_pool"), None)
    agrees = kv is None or abs(kv.residual) <= AGREE * abs(kv.logged or 1)
    return Reconciliation(plan.model, facts.engine, tuple(rows), tuple(notes), facts.lines,
                          agrees)


def _gib(value: float | None) -> int | None:
    return None if value is None else round(value * GiB)


def _weights(plan: Plan, facts: EngineLogFacts) -> Row | None:
    logged = _gib(facts.weights_gib)
    if logged is None:
        return None
    predicted = plan.line("weights") + plan.line("weight_metadata")
    gap = (logged - predicted) / GiB
    advice = "matches" if abs(gap) <= 0.02 * logged / GiB else (
        f"the log loads {gap:+.2f} GiB against the checkpoint's bytes: declare --weights "
        f"{facts.weights_gib}GiB")
    return Row("weights", "weights", "GiB", predicted, logged, advice)


def _free(plan: Plan, facts: EngineLogFacts) -> Row | None:
    """SGLang's budget is mem_fraction_static of the memory free before the weights load:
    the device less the CUDA context, non-torch memory and the collectives' buffers."""
    if facts.engine != SGLANG or facts.free_at_start_gib is None:
        return None
    predicted = plan.device_bytes - plan.line("non_torch") - plan.line("comm_buffers")
    logged = _gib(facts.free_at_start_gib)
    gap = (logged - predicted) / GiB
    advice = "matches" if abs(gap) <= 2 * ROUNDING_GIB else (
        f"{gap:+.2f} GiB free at start against the plan: declare --non-torch and --comm-buffer "
        "from the log ('Init torch distributed ends. mem usage') or check --device")
    return Row("free_at_start", "free before the weights load", "GiB", predicted, logged,
               advice)


def _pool(plan: Plan, facts: EngineLogFacts) -> Row | None:
    logged = _gib(facts.pool_gib)
    if logged is None:
        return None
    budget = plan.budget
    predicted = budget.num_gpu_blocks * budget.block_bytes
    gap = (logged - predicted) / GiB
    advice = "matches" if abs(gap) <= 2 * ROUNDING_GIB else (
        f"the pool is {abs(gap):.2f} GiB {'larger' if gap > 0 else 'smaller'} than planned: it "
        "follows the weights and free-memory rows")
    return Row("kv_pool", "KV pool", "GiB", predicted, logged, advice)


def _tokens(plan: Plan, facts: EngineLogFacts) -> Row | None:
    if facts.kv_tokens is None:
        return None
    predicted = plan.budget.kv_cache_tokens
    advice = "matches" if predicted == facts.kv_tokens else "follows the pool"
    return Row("kv_cache_tokens", "KV cache tokens", "tokens", predicted, facts.kv_tokens,
               advice)


def _arithmetic(plan: Plan, facts: EngineLogFacts) -> Row | None:
    """The engine's rule applied to its own logged lines, with the plan's bytes per token:
    SGLang (model_runner.profile_max_num_token): (free after the weights - free before x (1 -
    mem_fraction_static)) GiB // bytes a token, at most --max-total-tokens, in whole pages;
    TensorRT-LLM's PyTorch flow
    (_util.py _cal_max_tokens): available KV memory // bytes a token, in whole blocks; its C++
    engine flow (cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp: freePrimaryMemBytes = the
    logged 'available' x free_gpu_memory_fraction) // bytes a token, in whole blocks."""
    per_token = plan.budget.block_bytes // max(plan.budget.block_size_tokens, 1)
    if facts.kv_tokens is None or not per_token:
        return None
    if facts.engine == SGLANG:
        if None in (facts.after_weights_gib, facts.free_at_start_gib, facts.fraction):
            return None
        rest = facts.after_weights_gib - facts.free_at_start_gib * (1 - facts.fraction)
        predicted = int(rest * GiB // per_token)
        rule = "(free after the weights - free before x (1 - mem_fraction_static))"
        if facts.max_total_tokens is not None:  # --max-total-tokens: the smaller holds
            predicted = min(predicted, facts.max_total_tokens)
        page = facts.tokens_per_block or 1
        predicted = predicted // page * page
    else:
        available = facts.available_kv_gib
        rule = "available KV cache memory"
        if available is None and None not in (facts.free_at_start_gib, facts.fraction):
            available = facts.free_at_start_gib * facts.fraction
            rule = "available x free_gpu_memory_fraction"
        if available is None:
            return None
        block = facts.tokens_per_block or plan.budget.block_size_tokens
        predicted = int(available * GiB // per_token) // block * block
    close = abs(predicted - facts.kv_tokens) <= max(0.01 * facts.kv_tokens, 1)
    return Row("kv_tokens_from_lines", "KV tokens from the logged lines", "tokens", predicted,
               facts.kv_tokens, f"{rule} // {per_token:,} B a token{_cap(facts)}: " + (
                   "the engine's arithmetic, matched" if close else
                   "another bytes-per-token or rounding (check --kv-cache-dtype and --model)"))


def _cap(facts: EngineLogFacts) -> str:
    if facts.engine != SGLANG or facts.max_total_tokens is None:
        return ""
    return f", at most max_total_tokens {facts.max_total_tokens:,}"
