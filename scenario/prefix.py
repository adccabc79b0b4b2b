"""Where a traffic sample meets the plan: the prefix-cache reuse of its prompts in the plan's
KV pool (ledger/prefix_cache.py), what the shared blocks save, and the simulated TTFT with
and without prefix caching."""

from dataclasses import replace

from servecap.ledger.errors import SpecError
from servecap.ledger.prefix_cache import Reuse, reuse
from servecap.ledger.units import plural
from servecap.sim.deploy import run_deployment

from . import simulation, steps
from .prefix_trace import TraceRequest, sim_requests
from .spec import Scenario

NULL_BLOCKS = 1  # vLLM keeps block 0 as the null block, never pooled (v1/core/block_pool.py)
SHOWN_TOKENS = 12  # leading token ids shown for a group's prefix


def analyse(scenario: Scenario, trace: list[TraceRequest], source: str,
            rate: float | None = None, output_len: int | None = None,
            simulate: bool = True) -> dict:
    """The report `servecap prefix` prints: reuse with the plan's pool (vLLM's hit rate) and
    unbounded, the blocks shared, per-group and short-prefix rows, and TTFT with and
    without prefix caching when arrivals and output lengths are known."""
    check_load(rate, output_len)
    plan = simulation.rank(vllm_budget(scenario)).plan
    block_size, pool = geometry(scenario, plan)
    found = reuse([r.prompt for r in trace], block_size, pool)
    report = figures(found, trace, plan.kv_bytes_per_token)
    report.update(source=source, model=scenario.model.ref, pool_blocks=pool,
                  block_size_asked=plan.serve.block_size_tokens,
                  notes=notes(found, pool, plan.serve.block_size_tokens)
                  + too_long(trace, simulation.max_model_len(plan)))
    report["ttft"] = ttft(scenario, trace, found, source, rate, output_len) if simulate \
        else {"simulated": False, "why": "not asked"}
    return report


def check_load(rate: float | None, output_len: int | None) -> None:
    if rate is not None and not 0 < rate < float("inf"):
        raise SpecError("--rate", rate, "requests per second, a finite number > 0")
    if output_len is not None and output_len < 1:
        raise SpecError("--output-len", output_len, "a whole number of tokens >= 1")


def vllm_budget(scenario: Scenario) -> Scenario:
    """The Scenario planned under vLLM's budget (the release --engine vllm==X names, else
    the newest rules known): its block size (a hybrid's raised attention block) and block
    count are the geometry the prefix cache works in."""
    text = scenario.simulator.engine or ""
    version = text.split("==", 1)[1] if text.startswith("vllm==") else None
    return replace(scenario, engine=replace(scenario.engine, name="vllm", version=version))


def geometry(scenario: Scenario, plan) -> tuple[int, int]:
    """(tokens per block, usable blocks): vLLM's block size and num_gpu_blocks from the
    plan's budget (--num-gpu-blocks replaces the count, as num_gpu_blocks_override does),
    less the null block."""
    budget = plan.budget
    block_size = budget.block_size_tokens if budget else plan.serve.block_size_tokens
    blocks = scenario.memory.num_gpu_blocks_override or (
        budget.num_gpu_blocks if budget else simulation.num_blocks(plan, scenario))
    if blocks - NULL_BLOCKS < 1:
        field = "--num-gpu-blocks" if scenario.memory.num_gpu_blocks_override else "device"
        raise SpecError(field, blocks, f"at least {NULL_BLOCKS + 1} KV blocks: vLLM keeps "
                        "one as its null block (shard with -tp N, or a larger device)")
    return block_size, blocks - NULL_BLOCKS


def figures(found: Reuse, trace: list[TraceRequest], kv_bytes_per_token: int) -> dict:
    """The keys every output shares (--json's contract, docs/prefix.md)."""
    saved = found.pool_tokens_saved
    return {
        "block_size": found.block_size,
        "requests": found.requests,
        "requests_served": found.requests_served,
        "prompt_tokens": found.prompt_tokens,
        "cached_tokens": found.cached_tokens,
        "hit_rate": found.hit_rate,
        "prompt_tokens_all": found.prompt_tokens_all,
        "reusable_tokens": found.reusable_tokens,
        "hit_rate_unbounded": found.hit_rate_unbounded,
        "blocks_total": found.blocks_total,
        "blocks_distinct": found.blocks_distinct,
        "blocks_shared": found.blocks_shared,
        "pool_tokens_saved": saved,
        "pool_bytes_saved": saved * kv_bytes_per_token,
        "kv_bytes_per_token": kv_bytes_per_token,
        "groups": [{
            "group": f"g{n + 1}", "prefix_tokens": g.prefix_tokens,
            "prefix_blocks": g.prefix_tokens // found.block_size, "requests": g.requests,
            "reusable_tokens": g.reusable_tokens, "cached_tokens": g.cached_tokens,
            "first_line": trace[g.first].line,
            "first_tokens": list(trace[g.first].prompt.tokens[:SHOWN_TOKENS])}
            for n, g in enumerate(found.groups)],
        "short_prefix_warnings": [{
            "prefix_tokens": s.prefix_tokens, "requests": s.requests,
            "block_size": found.block_size, "first_line": trace[s.first].line,
            "first_tokens": list(trace[s.first].prompt.tokens[:s.prefix_tokens][:SHOWN_TOKENS]),
            "warning": short_warning(s.prefix_tokens, s.requests, found.block_size)}
            for s in found.short_prefixes],
    }


def short_warning(prefix_tokens: int, requests: int, block_size: int) -> str:
    return (f"{requests:,} requests share a {prefix_tokens}-token prefix, shorter than one "
            f"{block_size}-token block: vLLM caches full blocks only, so it reuses 0 tokens "
            f"of it (a shared prefix of {block_size}+ tokens, or a --block-size of at most "
            f"{prefix_tokens}, would be reused)")


def notes(found: Reuse, pool: int, asked: int) -> list[str]:
    out = [] if found.block_size == asked else [
        f"vLLM raises this hybrid's attention block to {found.block_size:,} tokens (its "
        f"state page; --block-size {asked}): prefixes are cached in {found.block_size:,}-token"
        " blocks; the state layers' own caching rules (mamba_cache_mode) are not modelled"]
    out += ["replayed one request at a time in file order: concurrent requests pin more "
           "blocks at once, so a busy server's hit rate can be lower (simulate models that)",
           "output tokens' blocks are not cached here: only the prompts are read"]
    skipped = found.requests - found.requests_served
    if skipped:
        them, need = ("it", "needs") if skipped == 1 else ("them", "need")
        out.append(f"{plural(skipped, 'request')} {need} more than the pool's {pool:,} blocks: "
                   f"vLLM never schedules {them}; left out of hit_rate, kept in hit_rate_unbounded")
    return out


def too_long(trace: list[TraceRequest], limit: int | None) -> list[str]:
    """A note for prompts vLLM refuses for max_model_len (counted in the figures anyway)."""
    over = sum(len(r.prompt.tokens) > (limit or 0) for r in trace) if limit else 0
    are, them = ("is", "it") if over == 1 else ("are", "them")
    return [f"{plural(over, 'prompt')} {are} longer than max_model_len ({limit:,} tokens): vLLM "
            f"refuses {them} (the simulation drops {them}); the hit figures still count "
            f"{them}"] if over else []


def ttft(scenario: Scenario, trace: list[TraceRequest], found: Reuse, source: str,
         rate: float | None, output_len: int | None) -> dict:
    """simulate's TTFT over the trace's requests with prefix caching on and off. The
    simulator holds one shared prefix per request: each request's group (its deepest
    shared full block), so prefixes nested inside a deeper group's are not reused there."""
    arrivals = _arrivals(trace, rate)
    outputs = [r.output_tokens or output_len for r in trace]
    if arrivals is None or None in outputs:
        return {"simulated": False, "why": "each line needs arrival_s (or give --rate) and "
                "output_tokens (or give --output-len) to simulate TTFT"}
    reqs = sim_requests(trace, found, arrivals, outputs)
    out = {"simulated": True,
           "arrivals": "the trace's arrival_s" if rate is None else
           f"one every {1 / rate:g} s (--rate {rate:g}), in file order"}
    sim = scenario.simulator
    policy = steps.default_policy(steps.simulated_row(sim.engine, sim.speed_of_light,
                                                      sim.coefficients))
    for label, on in (("with_prefix_caching", True), ("without_prefix_caching", False)):
        run = replace(scenario, scheduler=replace(scenario.scheduler, enable_prefix_caching=on),
                      simulator=replace(sim, policies=(policy,)))
        setup = simulation.setup(run, reqs, source)
        cfg = setup.configs[0]
        outcome = run_deployment(setup.requests, setup.coefficients, cfg, setup.num_blocks,
                                 setup.deployment, setup.slo, 1, False)[0]
        summary = outcome.summary
        out[label] = {"policy": cfg.policy, "ttft_ms": summary["ttft_ms"],
                      "prefix_hit_rate": summary.get("prefix_hit_rate", 0.0),
                      "prefill_tokens": sum(max(s.req.prompt_tokens - s.prefix_hit_tokens, 0)
                                            for s in outcome.seqs)}
    return out


def _arrivals(trace: list[TraceRequest], rate: float | None) -> list[float] | None:
    if rate is not None:
        return [i / rate for i in range(len(trace))]
    times = [r.arrival_s for r in trace]
    return None if None in times else times

