"""`servecap fit --find kv-offload`: the smallest --kv-offloading-size whose host tier serves a
target share of a workload's prefix tokens (sim/offload_fit.py: LRU stack distances), sized
by plan's own ledger (ledger/kv_offload.py)."""

import json
import shutil
import textwrap
from dataclasses import replace

from servecap.ledger.errors import SpecError
from servecap.ledger.kv_offload import offload_tier, size_for_tokens
from servecap.ledger.units import plural
from servecap.scenario.spec import DEFAULT, Workload
from servecap.scenario.workload import requests as workload_requests
from servecap.sim.offload_fit import reuse_distances

from . import plan_cmd

PROBE_GIB = 1.0  # the tier's geometry (blocks or chunks, their bytes) is read at one GiB


def offload_fit(model, flags, deploy, loaded, hit_rate, workload, trace, as_json) -> bool:
    """Print the answer (JSON or lines); False when no tier reaches the rate."""
    if hit_rate is None or isinstance(hit_rate, bool) or not 0 < hit_rate <= 1:
        raise SpecError("--hit-rate", hit_rate, "a share of offered prefix tokens in (0, 1], "
                        "e.g. 0.9 (with --find kv-offload)")
    if (workload is None) == (trace is None):  # fit takes no --input-len/--output-len
        raise SpecError("--workload/--trace", "both" if workload is not None else None,
                        "give exactly one: the workload YAML or CSV trace whose prefix "
                        "tokens the tier should serve")
    reqs, _, source = workload_requests(replace(DEFAULT, workload=Workload(file=workload,
                                                                           trace=trace)))
    probe = replace(deploy, kv_offloading_size=deploy.kv_offloading_size or PROBE_GIB)
    plan = plan_cmd.deployment_from_flags(model, flags, probe, loaded).plan
    spec, bsz = plan.serve.kv_offload, plan.serve.block_size_tokens
    block = plan.budget.block_bytes if plan.budget else plan.kv_bytes_per_token * bsz
    reuse = reuse_distances(reqs, bsz)
    if reuse.offered_tokens == 0:
        raise SpecError("--workload/--trace", source, "requests with prefix groups: without a "
                        "shared prefix no tier serves a hit")
    tokens = reuse.tokens_for(hit_rate)
    out = {"question": "kv-offload", "hit_rate_target": hit_rate, "workload": source,
           "backend": spec.backend, "world_size": spec.world_size,
           "offered_prefix_tokens": reuse.offered_tokens, "reuses": len(reuse.reuses),
           "best_hit_rate": round(reuse.best_rate, 6), "fits": tokens is not None,
           "kv_offloading_size_gib": None, "tokens": None, "bytes_per_rank": None,
           "tier_hit_rate": None,
           "model": "LRU stack distance over the requests in arrival order; the tier stores "
           "every prompt's full blocks; first uses miss; the GPU's prefix cache adds hits"}
    if tokens is not None:
        gib = size_for_tokens(spec, tokens, block, bsz, plan.kv_bytes_per_token)
        tier = offload_tier(replace(spec, size_gib=gib), block, bsz, plan.kv_bytes_per_token)
        out.update(kv_offloading_size_gib=gib, tokens=tier.tokens,
                   bytes_per_rank=tier.bytes_per_rank,
                   tier_hit_rate=round(reuse.rate_at(tier.tokens), 6))
    if as_json:
        print(json.dumps(out, indent=2))
    else:
        _lines(out)
    return tokens is not None


def _print(text: str) -> None:
    """One paragraph wrapped to the terminal (COLUMNS), as the rich tables are."""
    width = shutil.get_terminal_size((100, 24)).columns
    print(textwrap.fill(text, width=max(width, 40), break_on_hyphens=False))


def _lines(out: dict) -> None:
    _print(f"prefix tokens offered: {out['offered_prefix_tokens']:,} over {out['workload']} "
          f"({out['reuses']:,} reuses of a stored prefix); an unbounded tier serves "
          f"{out['best_hit_rate']:.1%} (first uses always miss)")
    if not out["fits"]:
        _print(f"no tier serves {out['hit_rate_target']:.1%}: at most "
              f"{out['best_hit_rate']:.1%} of this workload's prefix tokens are reuses")
        return
    _print(f"--kv-offloading-size {out['kv_offloading_size_gib']:g} "
          f"(--kv-offloading-backend {out['backend']}): {out['tokens']:,} tokens, "
          f"{out['bytes_per_rank']:,} B of host memory a rank over "
          f"{plural(out['world_size'], 'rank')}; serves {out['tier_hit_rate']:.1%} of prefix "
          f"tokens (target {out['hit_rate_target']:.1%})")
    _print(f"model: {out['model']}")
