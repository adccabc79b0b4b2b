"""`servecap models`, `devices` and `blocks`: the catalogs and the paging arithmetic."""

import json
from typing import Annotated

import typer

from servecap.ledger.devices import DEVICES
from servecap.ledger.kv import kv_bytes_per_token
from servecap.ledger.paging import paging_report
from servecap.ledger.units import GiB, fmt_bytes

from .errors import handle_errors

JSON = typer.Option("--json", help="Print a JSON list (byte fields are integers).")


def models(as_json: Annotated[bool, JSON] = False) -> None:
    """List the bundled model library: shape, KV bytes per token in bf16, and each source."""
    from servecap.model_configs import bundled_models, load_model  # pydantic schemas: only here

    rows = [_model_row(load_model(str(path)).spec) for path in bundled_models()]
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    cols = ("name", "type", "layers", "attention", "KV heads", "KV/token bf16", "experts")
    _print_table("bundled models (servecap plan NAME)", cols, [
        (r["name"], r["model_type"], str(r["layers"]), r["attention"], _kv_heads(r),
         fmt_bytes(r["kv_bytes_per_token_bf16"]), r["experts"]) for r in rows],
        [(r["name"], r["source"]) for r in rows])


def _model_row(spec) -> dict:
    att, moe = spec.attention, spec.moe
    return {"name": spec.name, "model_type": spec.model_type or "-", "layers": spec.num_layers,
            "kv_heads": att.num_kv_heads, "attention": att.kind, "moe": moe is not None,
            "experts": f"{moe.num_experts} (top {moe.num_experts_per_tok})" if moe else "-",
            "kv_bytes_per_token_bf16": kv_bytes_per_token(spec, 16), "source": spec.source}


def _kv_heads(row: dict) -> str:
    """MLA caches one shared latent per token, not per-head K/V: its head count would mislead."""
    return "latent" if row["attention"] == "mla" else str(row["kv_heads"])


def devices(as_json: Annotated[bool, JSON] = False) -> None:
    """List the device catalog: usable bytes as the driver reports them, beside vendor figures."""
    rows = [{"name": d.name, "label": d.label, "marketing_bytes": d.marketing_bytes,
             "usable_bytes": d.usable_bytes, "bandwidth_bytes_per_s": d.bandwidth_bytes_per_s,
             "bf16_flops_per_s": d.bf16_flops_per_s, "source": d.source} for d in DEVICES]
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    cols = ("name", "vendor GB (10^9 B)", "usable GiB (2^30 B)", "TB/s", "BF16 TFLOPS")
    _print_table("device catalog (usable = as the driver reports it)", cols, [
        (d.name, f"{d.marketing_bytes / 1e9:,.0f}", f"{d.usable_bytes / GiB:,.2f}",
         _per_tera(d.bandwidth_bytes_per_s, ".2f"), _per_tera(d.bf16_flops_per_s, ",.1f"))
        for d in DEVICES], [(d.name, d.source) for d in DEVICES])


def _print_table(title: str, cols: tuple[str, ...], rows: list[tuple[str, ...]],
                 sources: list[tuple[str, str]]) -> None:
    """A compact table, then each row's source in full below it (too long for a column)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    widest = max(len(row[0]) for row in rows)
    table.add_column(cols[0], no_wrap=True, min_width=widest)
    for col in cols[1:]:
        table.add_column(col, justify="left" if col in ("type", "attention") else "right")
    for row in rows:
        table.add_row(*row)
    console = Console()
    console.print(table)
    console.print("sources:")
    for name, source in sources:
        console.print(f"  {name}: {source}", highlight=False, markup=False)


def _per_tera(value: int | None, spec: str) -> str:
    return "unknown" if value is None else format(value / 1e12, spec)


def blocks(
    lengths: Annotated[list[int], typer.Argument(help="Live sequence lengths in tokens.")],
    block_size: Annotated[list[int], typer.Option(help="Block size in tokens; repeat to "
                                                  "compare.")] = [16],  # noqa: B006
    shared_prefix: Annotated[int, typer.Option(help="Prefix tokens shared by all.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON (one object per "
                                          "block size).")] = False,
) -> None:
    """Paging arithmetic: blocks, token slots, unused slots and block-table entries.

    Each sequence of S tokens occupies ceil(S / B) blocks of B tokens. Example (seed 000):

      servecap blocks 17 33 65 --block-size 16 --block-size 4
      # B=16: 10 blocks, 160 slots, 45 unused; B=4: 124 slots, 31 block-table entries
    """
    reports = [paging_report(list(lengths), b, shared_prefix) for b in block_size]
    keys = ("block_size_tokens", "logical_tokens", "num_blocks", "slot_tokens",
            "unused_slot_tokens", "block_table_entries", "shared_blocks")
    rows = [{k: getattr(r, k) for k in keys} for r in reports]
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"paging {len(lengths)} sequences, Σ {sum(lengths):,} tokens")
    for k in keys:
        table.add_column(k.replace("_", " "), justify="right")
    for r in rows:
        table.add_row(*(f"{r[k]:,}" for k in keys))
    Console().print(table)


def register(app: typer.Typer) -> None:
    for command in (models, devices, blocks):
        app.command()(handle_errors(command))
