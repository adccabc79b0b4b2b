"""The part of every simulation report that says what was simulated and with which numbers."""

from servecap.sim.frontend import api_server
from servecap.sim.metrics import PERCENTILE_METHOD
from servecap.sim.roofline import as_dict, decode_bound_tokens_per_s
from servecap.sim.speculative import draft_fixed_bytes, expected_tokens_per_step
from servecap.sim.step_model import prefill_pairs, step_s, terms

from .sim_inputs import Setup


def header(setup: Setup) -> dict:
    coef, plan = setup.coefficients, setup.plan
    slo = setup.slo
    return {
        "model": plan.model, "device": plan.serve.device_label,
        "source": setup.source, "num_requests": len(setup.requests),
        "engine": setup.engine,
        "batch": {"max_num_batched_tokens": setup.configs[0].max_num_batched_tokens,
                  "max_num_seqs": setup.configs[0].max_num_seqs, "source": setup.batch_source},
        "coefficients": as_dict(coef),
        "api_server": api_server(coef, setup.requests, setup.configs[0],
                                 setup.deployment.replicas).as_dict(),
        "decode_bound_tokens_per_s": decode_bound_tokens_per_s(coef),
        "step_terms": example_steps(coef),
        "memory": _memory(setup),
        "kv_pool": _kv_pool(setup),
        "kv_offload": _kv_offload(setup),
        "slo": {"ttft_s": slo.ttft_s, "itl_s": slo.itl_s, "e2e_s": slo.e2e_s,
                "percentiles": list(slo.percentiles)},
        "percentile_method": PERCENTILE_METHOD,
        "speculation": _speculation(setup.configs[0].speculation),
        "plan_notes": list(plan.notes),  # what plan says of this deployment: that vLLM
        # refuses its max_model_len, that it would not start, how the model was read
    }


EXAMPLE_TOKENS = 1024


def _kv_pool(setup: Setup) -> dict:
    """The pool the scheduler admits against; a resident draft (--draft) takes its weights
    out of the pool's bytes and adds its KV to each token's."""
    plan, draft = setup.plan, setup.draft
    pool = {"num_blocks": setup.num_blocks,
            "block_size_tokens": setup.configs[0].block_size_tokens,
            "kv_bytes_per_token": plan.kv_bytes_per_token,
            "pool_bytes": plan.device_bytes - plan.fixed_bytes,
            "state_blocks_per_request": setup.configs[0].state_blocks}
    if draft is None:
        return pool
    return pool | {"pool_bytes": pool["pool_bytes"] - draft_fixed_bytes(draft),
                   "draft_weights_bytes": draft_fixed_bytes(draft),
                   "draft_kv_bytes_per_token": draft.kv_bytes_per_token}


def _kv_offload(setup: Setup) -> dict | None:
    """The host tier the simulator keeps (--kv-offloading-size) and the link that loads it
    back: the device's host link (a vendor figure), else the swap bandwidth, assumed."""
    tier, coef = setup.plan.kv_offload, setup.coefficients
    if tier is None:
        return None
    link = coef.host_link_bytes_per_s
    return {"tier": tier.tier, "bytes_per_rank": tier.bytes_per_rank, "tokens": tier.tokens,
            "reload_bytes_per_s": link or coef.swap_bandwidth_bytes_per_s,
            "reload_link": "the device's host link (vendor figure, ledger/devices.py)" if link
            else "assumed: the swap bandwidth (no host-link figure for this device)",
            "model": "a prompt's full blocks are stored as it is computed (LRU over the tier's "
            "tokens); a prefix group evicted from the GPU pool but held in the tier is loaded "
            "back at the reload rate instead of prefilled"}


def example_steps(coef) -> dict:
    """The step model's terms (seconds) for two reference steps, so every term is visible:
    a 1,024-token prefill, and one decode step of 1 sequence at 1,024 tokens of context."""
    pairs = prefill_pairs(0, EXAMPLE_TOKENS)
    shapes = {"prefill_1024_tokens": (EXAMPLE_TOKENS, 0, pairs, 0),
              "decode_1_seq_at_1024": (0, 1, 0, EXAMPLE_TOKENS)}
    return {name: terms(coef, *shape) | {"step_s": step_s(coef, *shape)}
            for name, shape in shapes.items()}


def _memory(setup: Setup) -> dict:
    """The binding rank's ledger, the same integers `plan --json` prints for these sizes."""
    plan, coef = setup.plan, setup.coefficients
    out = {f"{item.key}_bytes": item.num_bytes for item in plan.lines}
    return out | {"device_bytes": plan.device_bytes, "committed_bytes": plan.committed_bytes,
                  "kv_bytes_per_token": plan.kv_bytes_per_token,
                  "tensor_parallel_size": coef.tensor_parallel_size,
                  "pipeline_parallel_size": coef.pipeline_parallel_size}


def _speculation(spec) -> dict | None:
    if spec is None:
        return None
    return {"draft_length": spec.draft_length, "acceptance": spec.acceptance,
            "expected_tokens_per_step": expected_tokens_per_step(spec.draft_length,
                                                                 spec.acceptance),
            "max_batch": spec.max_batch, "draft_coefficients": as_dict(spec.draft)}
