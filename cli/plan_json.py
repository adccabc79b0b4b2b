"""The plan as one JSON object: integer byte fields with unit-suffixed, stable key names."""

from servecap.ledger.plan import Plan


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
        "kv_bytes_total": plan.line("kv_cache"),
        "device_bytes": plan.device_bytes,
        "committed_bytes": plan.committed_bytes,
        "free_bytes": plan.free_bytes,
        "memory_ceiling_requests": plan.memory_ceiling_requests,
        "fits": plan.fits,
        "context_tokens": serve.context_tokens,
        "concurrency": serve.concurrency,
        "lengths_tokens": list(serve.live_lengths),
        "block_size_tokens": serve.block_size_tokens,
        "num_parameters": plan.num_parameters,
        "active_parameters": plan.active_parameters,
        "kv_bytes_per_request_by_layer_kind": plan.kv_bytes_by_kind,
        "paging": {
            "num_blocks": plan.paging.num_blocks,
            "slot_tokens": plan.paging.slot_tokens,
            "unused_slot_tokens": plan.paging.unused_slot_tokens,
            "block_table_entries": plan.paging.block_table_entries,
            "shared_blocks": plan.paging.shared_blocks,
        },
        "dtypes": {row[0].replace(" ", "_"): {"dtype": row[1], "bits": row[2]}
                   for row in plan.representations},
        "lines": [{"key": item.key, "bytes": item.num_bytes, "from": item.source,
                   "measured": item.measured} for item in plan.lines],
        "notes": list(plan.notes),
    }
