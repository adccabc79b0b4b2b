"""A plan or deployment as one JSON object: integer byte fields with unit-suffixed, stable key
names. No rich here: --json output never loads the table renderer."""

from servecap.ledger.engines import Budget
from servecap.ledger.layer_table import as_dicts, layer_rows
from servecap.ledger.plan import Plan
from servecap.ledger.ranks import Deployment, StagePlan

LEDGER_KEYS = ("weights_bytes", "weight_metadata_bytes", "runtime_peak_bytes", "safety_bytes",
               "kv_bytes_per_token", "kv_bytes_per_request", "kv_bytes_total", "device_bytes",
               "committed_bytes", "free_bytes", "memory_ceiling_requests", "fits",
               "kv_bytes_per_request_by_layer_kind", "kv_bytes_total_by_layer_kind", "lines",
               "lora_bytes", "lora_host_bytes", "host_lines", "eplb_bytes", "kv_offload",
               "encoder_cache_bytes", "encoder_profile_bytes")


def plan_to_dict(plan: Plan) -> dict:
    """Stable contract keys first (weights_bytes ... memory_ceiling_requests); more may follow."""
    serve = plan.serve
    return {
        "model": plan.model,
        "weights_bytes": plan.line("weights"),
        "weight_metadata_bytes": plan.line("weight_metadata"),
        "runtime_peak_bytes": plan.line("runtime_peak"),
        "safety_bytes": plan.line("safety"),
        "kv_bytes_per_token": plan.kv_bytes_per_token,
        "kv_bytes_per_request": plan.kv_bytes_per_request,
        "state_bytes_per_request": plan.state_bytes_per_request,
        "indexer_bytes_per_token": plan.indexer_bytes_per_token,
        "state_bytes_total": plan.line("state_cache"),
        "indexer_bytes_total": plan.line("indexer_cache"),
        "kv_bytes_total": plan.line("kv_cache"),
        "kv_decode_hold_bytes_total": plan.kv_decode_hold_bytes,
        "device_bytes": plan.device_bytes,
        "committed_bytes": plan.committed_bytes,
        "free_bytes": plan.free_bytes,
        "memory_ceiling_requests": plan.memory_ceiling_requests,
        "fits": plan.fits,
        "memory_ceiling_longest_requests": plan.longest_ceiling_requests,
        "context_tokens": serve.context_tokens,
        "concurrency": serve.concurrency,
        "lengths_tokens": list(serve.live_lengths),
        "block_size_tokens": serve.block_size_tokens,
        "num_parameters": plan.num_parameters,
        "active_parameters": plan.active_parameters,
        "kv_bytes_per_request_by_layer_kind": plan.kv_bytes_by_kind,
        "kv_bytes_total_by_layer_kind": plan.kv_in_use_by_kind,
        "paging": {
            "num_blocks": plan.paging.num_blocks,
            "stored_tokens": plan.paging.stored_tokens,
            "slot_tokens": plan.paging.slot_tokens,
            "unused_slot_tokens": plan.paging.unused_slot_tokens,
            "block_table_entries": plan.paging.block_table_entries,
            "shared_blocks": plan.paging.shared_blocks,
        },
        "dtypes": {row[0].replace(" ", "_"): {"dtype": row[1], "bits": row[2]}
                   for row in plan.representations},
        "lines": [{"key": item.key, "bytes": item.num_bytes, "from": item.source,
                   "measured": item.measured} for item in plan.lines],
        "lora_bytes": plan.line("lora_adapters"),
        "eplb_bytes": plan.line("eplb"),
        "encoder_cache_bytes": plan.line("encoder_cache"),
        "encoder_profile_bytes": plan.line("encoder_profile"),
        "lora_host_bytes": sum(item.num_bytes for item in plan.host if item.key == "lora_host"),
        "host_lines": [{"key": item.key, "bytes": item.num_bytes, "from": item.source}
                       for item in plan.host],
        "kv_offload": _offload(plan),
        "notes": list(plan.notes),
    }


def _offload(plan: Plan) -> dict | None:
    """The host KV tier (--kv-offloading-size): null without one."""
    tier, serve = plan.kv_offload, plan.serve
    if tier is None:
        return None
    lengths = serve.live_lengths
    per_request = -(-sum(lengths) // len(lengths))
    return {"tier": tier.tier, "bytes_per_rank": tier.bytes_per_rank, "tokens": tier.tokens,
            "backend": serve.kv_offload.backend, "size_gib": serve.kv_offload.size_gib,
            "num_chunks": tier.num_chunks, "chunk_tokens": tier.chunk_tokens,
            "chunk_bytes": tier.chunk_bytes, "tokens_per_request": per_request,
            "requests": tier.requests(per_request), "from": tier.how}


def source_to_dict(loaded) -> dict:
    """Where the model came from: its source, and for a Hub id the commit and what was read."""
    hub = loaded.hub
    return {"model_source": loaded.spec.source,
            "model_revision_sha": hub.sha if hub else None,
            "hub": hub.as_dict() if hub else None}


def layers_to_dict(loaded, deployment: Deployment) -> dict:
    """`layers`: every layer's geometry on the binding rank, at the plan's KV width
    (ledger.layer_table): kind, heads, K and V head sizes, KV bytes per token, the layer whose
    K and V it reads, its fixed state, its feed-forward block."""
    plan = deployment.plan
    kv_bits = next(row[2] for row in plan.representations if row[0] == "kv cache")
    return {"layers": as_dicts(layer_rows(loaded.spec, kv_bits,
                                          plan.shard.tensor_parallel_size))}


def deployment_to_dict(deployment: Deployment) -> dict:
    """The binding rank's plan at the top level (the plan contract's keys unchanged), the
    deployment's totals, and one entry per rank under `ranks`."""
    out = plan_to_dict(deployment.plan)
    out.update(_budget_dict(deployment.plan.budget))
    par = deployment.parallel
    out.update({
        "tensor_parallel_size": par.tensor_parallel_size,
        "pipeline_parallel_size": par.pipeline_parallel_size,
        "data_parallel_size": par.data_parallel_size,
        "num_devices": par.num_devices,
        "engine": deployment.plan.budget.engine if deployment.plan.budget else "plain",
        "binding_rank": deployment.stages[deployment.binding].ranks[0],
        "binding_reason": deployment.binding_reason,
        "weights_bytes_all_devices": deployment.weights_bytes_all_devices,
        "total_ceiling_requests": deployment.total_ceiling_requests,
        "ranks": [_rank(deployment, item, rank) for item in deployment.stages
                  for rank in item.ranks],
    })
    return out


def _rank(deployment: Deployment, item: StagePlan, rank: int) -> dict:
    full = plan_to_dict(item.plan)
    stage = item.stage
    out = {"rank": rank, "stage": stage.index,
           "tensor_parallel_rank": rank - item.ranks[0],
           "layers": [stage.layers[0], stage.layers[-1]], "num_layers": len(stage.layers),
           "holds_embedding": stage.first, "holds_lm_head": stage.last,
           "binding": item is deployment.stages[deployment.binding]}
    out.update({key: full[key] for key in LEDGER_KEYS})
    out.update(_budget_dict(item.plan.budget))
    return out


BUDGET_KEYS = ("kv_pool_bytes", "num_gpu_blocks", "kv_cache_tokens", "max_concurrency",
               "block_bytes", "blocks_per_request")


def _budget_dict(result: Budget | None) -> dict:
    """The engine's KV pool: null under the plain ledger (no engine pool), so a script reads
    the same keys whichever engine planned."""
    if result is None:
        return dict.fromkeys(BUDGET_KEYS)
    return {"kv_pool_bytes": result.kv_pool_bytes, "num_gpu_blocks": result.num_gpu_blocks,
            "kv_cache_tokens": result.kv_cache_tokens,
            "max_concurrency": float(result.max_concurrency),
            "block_bytes": result.block_bytes, "blocks_per_request": result.blocks_per_request}


def checkpoint_to_dict(report) -> dict:
    """plan --json: `checkpoint_formats` (null for an unquantized checkpoint)."""
    if report is None:
        return {"checkpoint_formats": None}
    on = report.on_device
    return {"checkpoint_formats": {
        "producer": report.producer, "checkpoint_bytes": report.checkpoint_bytes,
        "vllm_release": report.release,
        "formats": [{"format": s.name, "bits": s.bits, "num_parameters": s.num_parameters,
                     "value_bytes": s.value_bytes, "metadata_bytes": s.metadata_bytes,
                     "scales": s.scales} for s in report.shares],
        "resident_by_generation": [
            {"generation": r.generation, "compute_capability": r.sm, "runs": r.runs,
             "resident_bytes": r.resident_bytes if r.runs else None, "kernel_or_refusal": r.how}
            for r in report.rows],
        "device_compute_capability": report.sm,
        "device_generation": on.generation if on is not None else None}}
