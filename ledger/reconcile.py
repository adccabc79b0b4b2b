"""Predicted vs logged: each vLLM startup figure beside the plan's, its residual and advice."""

import re

from .engines import blocks_for_logged_tokens
from .errors import SpecError
from .plan import Plan
from .reconcile_ranks import binding_pool, rank_rows
from .reconcile_row import Reconciliation, Row
from .units import GiB
from .vllm_log import LogFacts

ROUNDING_GIB = 0.01  # vLLM prints GiB with two decimals
DIFFERENT_MODEL = 0.10  # block bytes more than 10% apart: not this model's KV cache
WEIGHTS_APART = 0.5  # weights 1.5x apart either way: not this checkpoint


def check_same_model(plan: Plan, facts: LogFacts, model_name: str) -> list[str]:
    """Fail when the log's weights or KV blocks are another model's size; a name that differs
    (a local folder, a renamed copy) is only noted: the config given is trusted."""
    notes = []
    if facts.model and not _same_name(facts.model, model_name):
        notes.append(f"the log loads {facts.model!r} and the config given is {model_name!r}: "
                     "the config is trusted; the weights and KV blocks below check that it is "
                     "the same model")
    loads = f" ({facts.model!r}?)" if facts.model else ""
    logged = facts.gib_bytes("weights_gib")
    predicted = plan.line("weights") + plan.line("weight_metadata")
    if logged and not 1 / (1 + WEIGHTS_APART) < logged / predicted < 1 + WEIGHTS_APART:
        raise SpecError("--model", model_name, f"the log is for a different model{loads} (or "
                        f"weight dtype or tp): it loads {facts.weights_gib} GiB of weights, the "
                        f"plan {predicted / GiB:.2f} GiB")
    implied = _implied_block_bytes(plan, facts)
    ours = plan.budget.block_bytes
    if implied and abs(implied / ours - 1) > DIFFERENT_MODEL:
        raise SpecError("--model", model_name, f"the log is for a different model{loads} (or KV "
                        f"dtype, block size or tp): its KV pool holds {implied:,.0f} B per "
                        f"block, {model_name} needs {ours:,} B")
    return notes


AFTER_POOL_GRAPHS = ("the log's 'Graph capturing finished ... took {gib} GiB' comes after the "
                     "KV pool was sized: those graphs use the headroom (1 - "
                     "gpu_memory_utilization), not the pool, so do not declare them as "
                     "--cuda-graph-memory (only vLLM >= 0.20's 'Estimated CUDA graph memory' "
                     "is taken out of the pool by default)")
AGREE = 0.05  # KV tokens (or the pool) within 5% and the same start verdict: exit 0


def reconcile(plan: Plan, replanned: Plan, facts: LogFacts, said: tuple[str, ...] = (),
              stages: tuple[tuple[tuple[int, ...], Plan], ...] = (),
              refusal: str | None = None) -> Reconciliation:
    """Rows for every figure the log printed. `plan` is the prediction from the config alone;
    `replanned` uses the log's own weights, activation, non-torch and graph lines as measured,
    so its pool residual isolates servecap's arithmetic from its estimates. Notes explain a
    residual only by what the log shows; `said`: notes on how the plan was made (its rules);
    `stages`: each pipeline stage's ranks and ledger (the rows per rank use its own stage's),
    `plan` being the binding stage's; `refusal`: why vLLM refuses to start before its profile
    (the free memory the log shows at startup), which decides the start row."""
    rows = [r for r in (_weights(plan, facts), _gib_row(plan, facts, "activation_peak_gib",
                                                        "runtime_peak", "activation peak"),
                        _gib_row(plan, facts, "non_torch_gib", "non_torch", "non-torch memory"),
                        _gib_row(plan, facts, "cuda_graph_gib", "cuda_graphs", "CUDA graph pool"))
            if r is not None]
    apart = frozenset(r.key for r in rows if not r.advice.startswith("matches"))
    rows += [r for r in (_pool(plan, facts, apart=apart), _replanned(replanned, facts))
             if r is not None]
    facts = binding_pool(plan, facts, stages)
    rows += rank_rows(plan, facts, stages) + _blocks(plan, facts) + _capacity_rows(plan, facts) \
        + _encoder_rows(plan, facts)
    rows.append(_start_row(plan, facts, refusal))
    notes = [f"GiB figures in the log are rounded to {ROUNDING_GIB} GiB; residuals within that "
             "are matches"] + [note for note in said if note]
    if facts.graph_capture_gib is not None and facts.cuda_graph_gib is None:
        notes.append(AFTER_POOL_GRAPHS.format(gib=facts.graph_capture_gib))
    notes += _unknown_memory(facts) + _block_note(plan, facts)
    return Reconciliation(plan.model, facts.engine_version, tuple(rows), tuple(notes),
                          facts.lines, _agrees(rows))


def _agrees(rows: list[Row]) -> bool:
    """The start verdicts agree, and the KV tokens (else the pool) are within AGREE."""
    by_key = {r.key: r for r in rows}
    if by_key["starts"].predicted != by_key["starts"].logged:
        return False
    if not by_key["starts"].logged:  # a failed start: the verdict is what is compared
        return True
    kv = by_key.get("kv_cache_tokens") or by_key.get("kv_pool")
    if kv is None or not kv.logged:
        return True
    return abs(kv.residual) <= AGREE * abs(kv.logged)


def _unknown_memory(facts: LogFacts) -> list[str]:
    """KV connectors hold GPU memory (staging buffers) that vLLM's lines do not show."""
    return [f"the log shows KV connector {name}: memory it holds on the GPU is not in any "
            "line vLLM prints, so it is unknown memory here, not explained away"
            for name in facts.connectors]


def _block_note(plan: Plan, facts: LogFacts) -> list[str]:
    """Bytes per logged block beyond this model's: a draft model only when the log shows one."""
    implied = _implied_block_bytes(plan, facts)
    if not implied or implied <= plan.budget.block_bytes * 1.005:
        return []
    extra = implied / plan.budget.block_bytes - 1
    if facts.draft:
        return [f"the log's blocks hold {extra:.1%} more bytes than {plan.model}'s: the log "
                "shows speculative decoding, whose draft layers share the pool"]
    return [f"the log's blocks hold {extra:.1%} more bytes than {plan.model}'s: no line of "
            "the log explains it (check the model, --kv-cache-dtype and --block-size)"]


def _weights(plan: Plan, facts: LogFacts) -> Row | None:
    logged = facts.gib_bytes("weights_gib")
    if logged is None:
        return None
    predicted = sum(plan.line(k) for k in ("weights", "weight_metadata", "weights_resident",
                                           "rotary_cache", "encoder_weights", "lora_adapters",
                                           "eplb"))
    gap = (logged - predicted) / GiB
    if abs(gap) <= ROUNDING_GIB or abs(logged - predicted) <= 0.002 * logged:
        advice = "matches" + (" (with vLLM's resident layout)"
                              if plan.line("weights_resident") else "")
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
    comm = plan.line("comm_buffers") if key == "non_torch" else 0
    encoder = plan.line("encoder_cache") + plan.line("encoder_profile") \
        if key == "runtime_peak" else 0
    if encoder:  # vLLM's profiled peak holds the encoder's outputs (and its own peak)
        predicted, label = predicted + encoder, "activation peak (with the encoder profile)"
    if comm:  # vLLM profiles NCCL and all-reduce buffers as non-torch memory
        predicted, label = predicted + comm, "non-torch + collective buffers"
    if key == "cuda_graphs" and not any(item.key == key for item in plan.lines):
        return Row(key, label, "GiB", 0, logged, "vLLM estimated it, but this release does "
                   "not subtract it (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0 by default): "
                   "the graphs use the headroom, not the pool")
    flag = {"runtime_peak": "--runtime-peak", "non_torch": "--non-torch",
            "cuda_graphs": "--cuda-graph-memory"}[key]
    advice = "matches" if abs(logged - predicted) / GiB <= ROUNDING_GIB else (
        f"the plan's {label} is an estimate {abs(logged - predicted) / GiB:.2f} GiB "
        f"{'below' if logged > predicted else 'above'} the log: declare {flag} {value}GiB"
        + (" (the profile pass runs --max-num-batched-tokens tokens)"
           if key == "runtime_peak" else "")
        + (" --comm-buffer 0 (the logged figure holds the collective buffers)" if comm else ""))
    return Row(key, label, "GiB", predicted, logged, advice)


def _replanned(plan: Plan, facts: LogFacts) -> Row | None:
    """Only meaningful when the log printed the lines the pool is made of."""
    printed = facts.weights_gib is not None and any(
        value is not None for value in (facts.non_torch_gib, facts.activation_peak_gib,
                                        facts.cuda_graph_gib))
    return _pool(plan, facts, replanned=True) if printed else None


def _pool(plan: Plan, facts: LogFacts, replanned: bool = False,
          apart: frozenset[str] = frozenset()) -> Row | None:
    logged = facts.gib_bytes("kv_pool_gib")
    if logged is None:
        return None
    predicted = plan.budget.kv_pool_bytes
    gap = (logged - predicted) / GiB
    if replanned:
        unknown = (f"; the log shows KV connector {', '.join(facts.connectors)}, whose GPU "
                   "memory no line states" if facts.connectors else "")
        advice = ("servecap's arithmetic matches vLLM's" if abs(gap) <= 2 * ROUNDING_GIB else
                  f"{gap:+.2f} GiB left after the logged lines: check --device "
                  "(total_gpu_memory) and --gpu-memory-utilization" + unknown)
        return Row("kv_pool_replanned", "KV pool from the logged lines", "GiB", predicted,
                   logged, advice)
    advice = "matches" if abs(gap) <= ROUNDING_GIB else (
        f"the pool is {abs(gap):.2f} GiB {'larger' if gap > 0 else 'smaller'} than planned: "
        + _pool_advice(facts, plan.line("comm_buffers"), apart))
    return Row("kv_pool", "KV pool", "GiB", predicted, logged, advice)


POOL_LINES = (("weights_gib", "weights", "--weights", "weights"),
              ("activation_peak_gib", "runtime_peak", "--runtime-peak", "activation peak"),
              ("non_torch_gib", "non_torch", "--non-torch", "non-torch"))


def _pool_advice(facts: LogFacts, comm: int = 0, apart: frozenset[str] = frozenset()) -> str:
    """Point to the logged lines that differ from the plan (`apart`: their row keys) and can
    be declared; where every logged line matches, to the lines the log does not print; or say
    that none were logged. A logged non-torch figure holds the collective buffers the plan
    counts apart (comm bytes). Declaring a line that already matches would not move the pool."""
    logged = [(key, flag, label) for attr, key, flag, label in POOL_LINES
              if getattr(facts, attr) is not None]
    flags = [flag for key, flag, _ in logged if key in apart]
    if comm and facts.non_torch_gib is not None and "non_torch" in apart:
        flags.append("--comm-buffer 0")
    if flags:
        return "it follows the lines above; declare their logged values (" + \
            ", ".join(flags) + ")"
    unprinted = [label for attr, _, _, label in POOL_LINES if getattr(facts, attr) is None]
    if logged and unprinted:
        return (f"the logged {' and '.join(label for *_, label in logged)} match the plan: "
                f"the rest is in lines this log does not print ({', '.join(unprinted)}, "
                "estimated here): measure them (servecap verify) or check --device and "
                "--gpu-memory-utilization")
    if logged:
        return ("every line the log prints matches the plan: check --device "
                "(total_gpu_memory) and --gpu-memory-utilization")
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


def _encoder_rows(plan: Plan, facts: LogFacts) -> list[Row]:
    """The log's 'Encoder cache will be initialized with a budget of N tokens, and profiled
    with M items' beside the profile the plan computes (ledger/encoder.py)."""
    found = plan.encoder_profile
    if facts.encoder_budget_tokens is None or found is None:
        return []
    hint = ("differs: check --max-num-batched-tokens, --max-num-seqs, --limit-mm-per-prompt "
            "and --mm-processor-kwargs")
    return [Row("encoder_budget_tokens", "encoder cache budget", "tokens", found.budget_tokens,
                facts.encoder_budget_tokens,
                "matches" if found.budget_tokens == facts.encoder_budget_tokens else hint),
            Row("encoder_profiled_items", f"{found.modality} items profiled", "items",
                found.items, facts.encoder_profiled_items or 0,
                "matches" if found.items == facts.encoder_profiled_items else hint)]


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


def _capacity_rows(plan: Plan, facts: LogFacts) -> list[Row]:
    """V0's 'maximum number of tokens that can be stored in KV cache (N)' = blocks x block
    size; V1's 'estimated maximum model length is N' for the pool it printed."""
    budget, rows = plan.budget, []
    if facts.v0_max_tokens is not None:
        predicted = budget.num_gpu_blocks * budget.block_size_tokens
        rows.append(Row("v0_max_tokens", "tokens the KV cache can store (V0)", "tokens",
                        predicted, facts.v0_max_tokens, "matches" if predicted ==
                        facts.v0_max_tokens else "follows the blocks"))
    if facts.estimated_max_len is not None and facts.kv_pool_gib is not None:
        pool = round(facts.kv_pool_gib * GiB)
        per_block = budget.block_bytes
        predicted = pool // per_block * budget.block_size_tokens if per_block else 0
        close = abs(predicted - facts.estimated_max_len) <= ROUNDING_GIB / 2 * GiB / max(
            per_block, 1) * budget.block_size_tokens
        rows.append(Row("estimated_max_len", "estimated maximum model length (V1)", "tokens",
                        predicted, facts.estimated_max_len,
                        "matches, to the pool's rounding" if close else
                        "the logged pool holds a different length: another KV layout?"))
    return rows


def _start_row(plan: Plan, facts: LogFacts, refusal: str | None = None) -> Row:
    """1 = starts, 0 = refused. The log shows a failure or none; the plan decides, unless the
    log's free memory at startup is below what the release requests (refusal)."""
    logged = 0 if facts.failure else 1
    predicted = 1 if plan.starts and refusal is None else 0
    if predicted == logged:
        advice = "agrees" + (f": {refusal}" if refusal else
                             f": {facts.failure}" if facts.failure else "")
    elif logged == 0:
        advice = (f"vLLM failed ({facts.failure}) where the plan starts: " + (
            "the failure came after the pool was sized, which its arithmetic does not cover"
            if plan.budget.num_gpu_blocks >= plan.budget.blocks_per_request else
            "the plan's pool is larger than vLLM's"))
    else:
        advice = "the plan says it would not start; the log shows no failure" + (
            f" ({refusal})" if refusal else "")
    return Row("starts", "engine starts (1) or refuses (0)", "flag", predicted, logged, advice)


def _logged_blocks(plan: Plan, facts: LogFacts) -> int | None:
    """V0 prints the blocks; V1 prints tokens, read back by the release's rule at the plan's
    max_model_len, the one its blocks per request were counted at (engines.logged_tokens)."""
    if facts.num_gpu_blocks is not None:
        return facts.num_gpu_blocks
    if facts.kv_cache_tokens is None:
        return None
    return blocks_for_logged_tokens(plan.budget, facts.kv_cache_tokens,
                                    plan.serve.context_tokens)


def _implied_block_bytes(plan: Plan, facts: LogFacts) -> float | None:
    blocks = _logged_blocks(plan, facts)
    if not blocks or facts.kv_pool_gib is None:
        return None
    return facts.kv_pool_gib * GiB / blocks


def _same_name(logged: str, model_name: str) -> bool:
    """The same model whatever the spelling: a local directory ('../qwen25_32b_instruct_HF/'),
    a repo ('Qwen/Qwen2.5-32B-Instruct') or a fixture folder ('Qwen--Qwen2.5-32B-Instruct')."""
    def norm(name: str) -> str:
        base = name.rstrip("/").rsplit("/", 1)[-1].rsplit("--", 1)[-1].lower()
        words = [w for w in re.split(r"[-_.\s]+", base) if w]
        while words and words[-1] in ("instruct", "chat", "hf", "base", "it"):
            words.pop()
        return "".join(words)
    a, b = norm(logged), norm(model_name)
    return bool(a and b) and (a in b or b in a)
