"""`servecap pack` on screen and as JSON: one ledger per device, then each instance."""

from rich.console import Console
from rich.table import Table

from servecap.ledger.pack import RULES
from servecap.ledger.units import GiB, plural
from servecap.scenario.pack import Packing

from .narrow import print_table


def packing_to_dict(result: Packing) -> dict:
    return {
        "fits": result.fits,
        "devices": [{
            "index": d.index, "device": d.label, "device_bytes": d.device_bytes,
            "held": [{"instance": h.instance, "rank": h.rank, "reserved_bytes": h.reserved,
                      "cuda_context_bytes": h.context, "cuda_graphs_outside_bytes": h.graphs,
                      "held_bytes": h.total, "needed_bytes": h.needed, "from": h.how}
                     for h in d.held],
            "used_bytes": d.used, "left_bytes": d.left} for d in result.devices],
        "instances": [{
            "name": p.name, "engine": p.engine, "rule": RULES[p.rule], "gpus": list(p.gpus),
            "free_before_bytes": p.free_before, "starts": p.refusal is None,
            "refusal": p.refusal,
            "kv_pool_bytes": _budget(p, "kv_pool_bytes"),
            "max_concurrency": _budget(p, "max_concurrency"),
            "memory_ceiling_requests": p.deployment.plan.memory_ceiling_requests
            if p.deployment else None,
            "held": [{"rank": h.rank, "gpu": g, "reserved_bytes": h.reserved,
                      "cuda_context_bytes": h.context, "cuda_graphs_outside_bytes": h.graphs,
                      "held_bytes": h.total, "needed_bytes": h.needed}
                     for h, g in zip(p.held, p.gpus, strict=True)],
        } for p in result.placed],
        "first_refusal": next(({"instance": p.name, "why": p.refusal} for p in result.placed
                               if p.refusal is not None), None),
        "not_tried": list(result.not_started),
    }


def _budget(placed, key: str):
    budget = placed.deployment.plan.budget if placed.deployment else None
    return getattr(budget, key) if budget is not None else None


def render_packing(result: Packing, console: Console | None = None) -> None:
    """A table per device (GiB, 2^30 bytes): what each instance holds and what is left; then
    each instance's verdict; within the terminal's width."""
    console = console or Console()
    for d in result.devices:
        table = Table(title=f"device {d.index}: {d.label}, {d.device_bytes / GiB:,.2f} GiB",
                      title_justify="left")
        for name, just in (("instance", "left"), ("reserved", "right"), ("context", "right"),
                           ("graphs", "right"), ("held", "right"), ("needed", "right")):
            table.add_column(name, justify=just, no_wrap=just == "right")
        for h in d.held:
            table.add_row(h.instance + (f" (rank {h.rank})" if h.rank else ""), _g(h.reserved),
                          _g(h.context), _g(h.graphs), _g(h.total), _g(h.needed))
        table.add_section()
        table.add_row("used", "", "", "", _g(d.used), "")
        table.add_row("left", "", "", "", _g(d.left), "")
        print_table(console, table)
    console.print("GiB (2^30 bytes). reserved: inside the engine's budget; context (the "
                  "process's CUDA context) and graphs: outside it; needed: what the declared "
                  "load needs (every line but the unused pool and the headroom).",
                  soft_wrap=False)
    for p in result.placed:
        head = f"{p.name} ({p.engine}, gpus {','.join(map(str, p.gpus))}): "
        if p.refusal is None:
            plan = p.deployment.plan
            console.print(head + f"starts; {p.free_before / GiB:.2f} GiB were free; "
                          f"{RULES[p.rule]}; ceiling "
                          f"{plural(plan.memory_ceiling_requests, 'request')} of "
                          f"{plan.serve.context_tokens:,} tokens")
        else:
            console.print(head + f"does NOT start: {p.refusal}")
    if result.not_started:
        console.print("not tried (after the first refusal): " + ", ".join(result.not_started))
    console.print("fits: every instance starts" if result.fits else
                  "does not fit: the first refusal above, in start order")


def _g(num_bytes: int) -> str:
    return f"{num_bytes / GiB:,.2f}"
