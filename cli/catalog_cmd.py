"""`servecap models`, `devices` and `blocks`: the catalogs and the paging arithmetic."""

import json
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from servecap.ledger.devices import DEVICES
from servecap.ledger.paging import paging_report
from servecap.ledger.units import GiB
from servecap.model_configs import bundled_models, load_model

from .errors import handle_errors


def models(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """List the bundled model library with each model's source."""
    rows = []
    for path in bundled_models():
        spec = load_model(str(path)).spec
        att = spec.attention
        rows.append({"name": spec.name, "model_type": spec.model_type or "-",
                     "layers": spec.num_layers, "kv_heads": att.num_kv_heads,
                     "attention": att.kind, "moe": spec.moe is not None,
                     "source": spec.source})
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    table = Table(title="bundled models")
    for col in ("name", "model_type", "layers", "attention", "kv_heads", "moe", "source"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(*(str(r[c]) for c in ("name", "model_type", "layers", "attention",
                                              "kv_heads", "moe", "source")))
    Console().print(table)


def devices(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """List the device catalog: usable bytes as the driver reports them, beside vendor figures."""
    rows = [{"name": d.name, "label": d.label, "marketing_bytes": d.marketing_bytes,
             "usable_bytes": d.usable_bytes, "bandwidth_bytes_per_s": d.bandwidth_bytes_per_s,
             "bf16_flops_per_s": d.bf16_flops_per_s, "source": d.source} for d in DEVICES]
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    table = Table(title="device catalog (usable = as the driver reports it)")
    for col in ("name", "vendor GB (10^9)", "usable GiB (2^30)", "TB/s", "BF16 TFLOPS",
                "source"):
        table.add_column(col, overflow="fold")
    for d in DEVICES:
        table.add_row(d.name, f"{d.marketing_bytes / 1e9:,.0f}", f"{d.usable_bytes / GiB:,.2f}",
                      _per_tera(d.bandwidth_bytes_per_s, ".2f"),
                      _per_tera(d.bf16_flops_per_s, ",.1f"), d.source)
    Console().print(table)


def _per_tera(value: int | None, spec: str) -> str:
    return "unknown" if value is None else format(value / 1e12, spec)


def blocks(
    lengths: Annotated[list[int], typer.Argument(help="Live sequence lengths in tokens.")],
    block_size: Annotated[list[int], typer.Option(help="Block size in tokens; repeat to "
                                                  "compare.")] = [16],  # noqa: B006
    shared_prefix: Annotated[int, typer.Option(help="Prefix tokens shared by all.")] = 0,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Paging arithmetic: blocks, token slots, unused slots and block-table entries."""
    reports = [paging_report(list(lengths), b, shared_prefix) for b in block_size]
    keys = ("block_size_tokens", "logical_tokens", "num_blocks", "slot_tokens",
            "unused_slot_tokens", "block_table_entries", "shared_blocks")
    rows = [{k: getattr(r, k) for k in keys} for r in reports]
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    table = Table(title=f"paging {len(lengths)} sequences, Σ {sum(lengths):,} tokens")
    for k in keys:
        table.add_column(k.replace("_", " "), justify="right")
    for r in rows:
        table.add_row(*(f"{r[k]:,}" for k in keys))
    Console().print(table)


def register(app: typer.Typer) -> None:
    for command in (models, devices, blocks):
        app.command()(handle_errors(command))
