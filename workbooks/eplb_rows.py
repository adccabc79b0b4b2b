"""Redundant experts and EPLB's state in a workbook (with --enable-eplb): vLLM's knobs as
Inputs, and the Ledger line as a formula over them (ledger/eplb.py, cell for cell)."""

from servecap.ledger.arch import routed_layers
from servecap.ledger.eplb import BUFFER_FROM, MAX_EXPERT_REDUNDANCY, SLOTS_FROM, expert_bytes
from servecap.ledger.plan_weights import weight_format

from . import style
from .source import WorkbookSource

_PHYSICAL = "(num_routed_experts+num_redundant_experts)"
_LOCAL = f"({_PHYSICAL}/ep_size)"
LINE = ("eplb_line_bytes", "redundant experts and EPLB state",
        f"=num_moe_layers*({_LOCAL}*expert_bytes-INT(num_routed_experts*expert_bytes/ep_size))"
        f"+IF(eplb_move_buffer,{_LOCAL}*expert_bytes,0)"
        f"+num_moe_layers*({_PHYSICAL}+num_routed_experts*eplb_map_slots+num_routed_experts)*8"
        f"+num_moe_layers*{_PHYSICAL}*4*(1+eplb_window_size)",
        "MoE layers x ((E + R) / ep experts - E / ep) x one expert, + one layer's local "
        "experts as the move buffer (vLLM >= 0.12), + int64 maps and int32 load window",
        "eplb")


def eplb_inputs(src: WorkbookSource) -> list[tuple]:
    """What-if rows: the redundant experts, the group they spread over, the window; and the
    model's experts and the release's table width. None without EPLB."""
    eplb, spec = src.serve.eplb, src.spec
    if eplb is None:
        return []
    return [
        ("num_redundant_experts", eplb.num_redundant_experts, style.COUNT, "experts",
         "R: --eplb-config num_redundant_experts (E + R must divide by ep_size)"),
        ("ep_size", eplb.ep_size, style.COUNT, "ranks", "the expert-parallel group: tp x dp"),
        ("eplb_window_size", eplb.window_size, style.COUNT, "steps",
         "--eplb-config window_size: load history kept on every rank"),
        ("num_routed_experts", spec.moe.num_experts, style.COUNT, "experts", "E of the model"),
        ("num_moe_layers", len(routed_layers(spec)), style.LAYERS, "layers",
         "layers whose MLP routes to experts"),
        ("expert_bytes", expert_bytes(spec, *weight_format(spec, src.serve, src.overrides)),
         style.BYTES, "bytes", "one routed expert of one layer, values and scales"),
        ("eplb_map_slots", MAX_EXPERT_REDUNDANCY + 1 if eplb.release >= SLOTS_FROM
         else eplb.num_redundant_experts + 1, style.COUNT, "slots",
         "logical_to_physical_map's width: 1,024 from vLLM 0.10, R + 1 before"),
        ("eplb_move_buffer", eplb.release >= BUFFER_FROM, style.BOOL, "TRUE/FALSE",
         "one layer's local experts kept as the move buffer (vLLM >= 0.12)"),
    ]


def eplb_settings(src: WorkbookSource) -> list[tuple]:
    """What replays the plan: EPLB is on (its knobs are the rows above)."""
    if src.serve.eplb is None:
        return []
    return [("enable_eplb", True, style.BOOL, "TRUE/FALSE", "--enable-eplb")]
