"""A deployment on screen: one ledger per rank, the binding rank, the engine's budget."""

from rich.console import Console

from servecap.ledger.engines import Budget
from servecap.ledger.ranks import Deployment, StagePlan
from servecap.ledger.units import fmt_gib, plural

from .plan_view import render_plan


def render_deployment(deployment: Deployment, console: Console) -> None:
    """The single-GPU plain plan prints exactly as before; otherwise a ledger per stage."""
    single = deployment.parallel.num_devices == 1 and deployment.plan.budget is None
    for item in deployment.stages:
        render_plan(item.plan, console, "" if single else _heading(deployment, item),
                    notes=item is deployment.stages[0])
        if item.plan.budget is not None:
            _budget(item.plan.budget, item.plan.serve.context_tokens, console)
    if not single:
        _summary(deployment, console)


def _heading(deployment: Deployment, item: StagePlan) -> str:
    ranks = item.ranks
    name = f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {ranks[0]}-{ranks[-1]}"
    stage = item.stage
    holds = [f"layers {stage.layers[0]}-{stage.layers[-1]}"]
    holds += ["embedding"] if stage.first else []
    holds += ["lm_head"] if stage.last else []
    tp = deployment.parallel.tensor_parallel_size
    shard = f", 1/{tp} tensor shard each" if tp > 1 else ""
    return f"{name} (stage {stage.index}: {', '.join(holds)}{shard})"


def _budget(result: Budget, max_model_len: int, console: Console) -> None:
    """The figures in the engine's own words, as its startup log prints them."""
    console.print(f"{result.engine} KV pool: {result.kv_pool_bytes:,} B = "
                  f"{fmt_gib(result.kv_pool_bytes)} ({result.how})")
    console.print(f"  # GPU blocks: {result.num_gpu_blocks:,} of "
                  f"{plural(result.block_size_tokens, 'token')} ({result.block_bytes:,} B each)")
    console.print(f"  GPU KV cache size: {result.kv_cache_tokens:,} tokens")
    console.print(f"  Maximum concurrency for {max_model_len:,} tokens per request: "
                  f"{result.max_concurrency:.2f}x")


def _summary(deployment: Deployment, console: Console) -> None:
    par = deployment.parallel
    console.print(deployment.binding_reason)
    console.print(f"devices: tp {par.tensor_parallel_size} x pp {par.pipeline_parallel_size} "
                  f"x dp {par.data_parallel_size} = {par.num_devices}; weights on all devices "
                  f"{fmt_gib(deployment.weights_bytes_all_devices)}")
    console.print(f"ceiling per replica "
                  f"{plural(deployment.plan.memory_ceiling_requests, 'request')}; "
                  f"{plural(par.data_parallel_size, 'replica')} "
                  f"{'serves' if par.data_parallel_size == 1 else 'serve'} "
                  f"{deployment.total_ceiling_requests:,}"
                  " (replicas add requests and weights, not per-device room)")
