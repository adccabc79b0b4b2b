"""Predicted vs logged for SGLang and TensorRT-LLM: the weights, the free memory the budget is
taken of, the KV pool and its tokens, and the engine's own arithmetic redone from the logged
lines (each rule as its source states it)."""

from .engine_log import SGLANG, EngineLogFacts
from .plan import Plan
from .reconcile import AGREE, ROUNDING_GIB, Reconciliation, Row
from .units import GiB


def reconcile_engine(plan: Plan, facts: EngineLogFacts, said: tuple[str, ...] = (),
                     fraction: float | None = None) -> Reconciliation:
    """Rows for every figure the log printed; agrees when the KV tokens planned from the
    logged memory (where the log prints it: _arithmetic), else the plan's KV tokens (else its
    pool), are within AGREE. `fraction`: the memory fraction the plan used, for a log that
    prints none."""
    logged = _arithmetic(plan, facts, fraction)
    rows = [r for r in (_weights(plan, facts), _free(plan, facts), _pool(plan, facts, logged),
                        _tokens(plan, facts), logged) if r is not None]
    notes = [f"{facts.engine} prints GiB with two decimals ('GB' in SGLang's lines and in "
             f"TensorRT-LLM's runtime-buffer and decoder lines): residuals within {ROUNDING_GIB} "
             "GiB are matches"] + [n for n in said if n]
    kv = next((r for key in ("kv_tokens_from_lines", "kv_cache_tokens", "kv_pool")
               for r in rows if r.key == key), None)
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


def _pool(plan: Plan, facts: EngineLogFacts, logged_row: Row | None = None) -> Row | None:
    logged = _gib(facts.pool_gib)
    if logged is None:
        return None
    budget = plan.budget
    predicted = budget.num_gpu_blocks * budget.block_bytes
    gap = (logged - predicted) / GiB
    advice = "matches" if abs(gap) <= 2 * ROUNDING_GIB else (
        f"the pool is {abs(gap):.2f} GiB {'larger' if gap > 0 else 'smaller'} than planned: it "
        + ("follows the memory the log prints (the 'KV tokens from the logged memory' row)"
           if logged_row is not None else "follows the weights and free-memory rows"))
    return Row("kv_pool", "KV pool", "GiB", predicted, logged, advice)


def _tokens(plan: Plan, facts: EngineLogFacts) -> Row | None:
    if facts.kv_tokens is None:
        return None
    predicted = plan.budget.kv_cache_tokens
    advice = "matches" if predicted == facts.kv_tokens else "follows the pool"
    return Row("kv_cache_tokens", "KV cache tokens", "tokens", predicted, facts.kv_tokens,
               advice)


def _arithmetic(plan: Plan, facts: EngineLogFacts, fraction: float | None = None) -> Row | None:
    """The pool planned from the memory the log prints where the engine measures it, with the
    plan's bytes per token; a logged figure replaces the plan's estimate and the advice names
    which came from the log. SGLang (model_runner.profile_max_num_token): (free after the
    weights - free before x (1 - mem_fraction_static)) GiB // bytes a token, at most
    --max-total-tokens, in whole pages. TensorRT-LLM: memory_for_kv // bytes a token in whole
    blocks (_logged_kv)."""
    per_token = plan.budget.block_bytes // max(plan.budget.block_size_tokens, 1)
    if facts.kv_tokens is None or not per_token:
        return None
    if facts.engine == SGLANG:
        if None in (facts.after_weights_gib, facts.free_at_start_gib, facts.fraction):
            return None
        rest = facts.after_weights_gib - facts.free_at_start_gib * (1 - facts.fraction)
        predicted = int(rest * GiB // per_token)
        rule = "(free after the weights - free before x (1 - mem_fraction_static)), all logged"
        if facts.max_total_tokens is not None:  # --max-total-tokens: the smaller holds
            predicted = min(predicted, facts.max_total_tokens)
        page = facts.tokens_per_block or 1
        predicted = predicted // page * page
    else:
        found = _logged_kv(plan, facts, facts.fraction or fraction)
        if found is None:
            return None
        kv_bytes, rule = found
        block = facts.tokens_per_block or plan.budget.block_size_tokens
        predicted = int(kv_bytes // per_token) // block * block
    close = abs(predicted - facts.kv_tokens) <= max(0.01 * facts.kv_tokens, 1)
    return Row("kv_tokens_from_lines", "KV tokens from the logged memory", "tokens", predicted,
               facts.kv_tokens, f"{rule} // {per_token:,} B a token{_cap(facts)}: " + (
                   "the engine's arithmetic, matched" if close else
                   "another bytes-per-token or rounding (check --kv-cache-dtype and --model)"
                   if "all logged" in rule else
                   "the rest is what the log does not print (see the rule's plan terms)"))


def _logged_kv(plan: Plan, facts: EngineLogFacts,
               fraction: float | None) -> tuple[float, str] | None:
    """TensorRT-LLM's KV memory from its logged lines, where it prints them.

    PyTorch flow (tensorrt_llm/_torch/pyexecutor/_util.py KvCacheCreator): the logged
    'available KV cache memory', fraction x (total - profiled peak + the estimation pass's
    cache). C++ flow (cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp
    BaseKVCacheManager::calculateFreeMemBytes): fraction x the free memory cudaMemGetInfo gives
    after the engine, TensorRT's execution context, the runtime buffers and the decoder are
    allocated (trtGptModelInflightBatching.cpp): the logged 'available', else the device less
    the allocations the log prints (engine size, execution context, runtime buffers, decoder)
    and the plan's non-torch and collective lines for what it does not."""
    if None not in (facts.total_gib, facts.peak_gib, facts.fraction):
        return (facts.total_gib - facts.peak_gib + (facts.tmp_kv_gib or 0)) * GiB * \
            facts.fraction, (f"fraction {facts.fraction:g} x (total - profiled peak + the "
                             "estimation pass's cache), all logged")
    if facts.available_kv_gib is not None:
        return facts.available_kv_gib * GiB, "the logged available KV cache memory, all logged"
    if fraction is None:
        return None
    if facts.free_at_start_gib is not None:
        return facts.free_at_start_gib * GiB * fraction, (
            f"the logged available x free_gpu_memory_fraction {fraction:g}, all logged")
    if facts.runtime_buffers_gib is None and facts.decoder_gib is None:
        return None
    logged = {"engine": None if facts.engine_mib is None else facts.engine_mib / 1024,
              "execution context": None if facts.context_mib is None else facts.context_mib / 1024,
              "runtime buffers": facts.runtime_buffers_gib, "decoder": facts.decoder_gib}
    estimates = {"engine": (plan.line("weights") + plan.line("weight_metadata")) / GiB,
                 "execution context": plan.line("runtime_peak") / GiB,
                 "runtime buffers": 0.0, "decoder": 0.0}
    held = sum(v if v is not None else estimates[k] for k, v in logged.items())
    rest = (plan.line("non_torch") + plan.line("comm_buffers")) / GiB
    free = plan.device_bytes / GiB - held - rest
    read = ", ".join(f"{k} {v:.2f}" for k, v in logged.items() if v is not None)
    planned = ", ".join([f"{k} {estimates[k]:.2f}" for k, v in logged.items() if v is None]
                        + [f"non-torch and collectives {rest:.2f}",
                           f"device {plan.device_bytes / GiB:.2f}"])
    return max(free, 0.0) * GiB * fraction, (
        f"free_gpu_memory_fraction {fraction:g} x (device - allocations before the KV cache), "
        f"GiB from the log: {read}; from the plan: {planned}")


def _cap(facts: EngineLogFacts) -> str:
    if facts.engine != SGLANG or facts.max_total_tokens is None:
        return ""
    return f", at most max_total_tokens {facts.max_total_tokens:,}"
