"""`servecap models`, `devices` and `blocks`: the catalogs and the paging arithmetic."""

import json
from typing import Annotated

import typer

from servecap.ledger.devices import DEVICES
from servecap.ledger.errors import SpecError
from servecap.ledger.kv import kv_bytes_per_token
from servecap.ledger.paging import check_lengths, check_shared_prefix, paging_report
from servecap.ledger.units import GiB, fmt_bytes, plural

from .errors import handle_errors

JSON = typer.Option("--json", help="Print a JSON list (byte fields are integers).")


def models(as_json: Annotated[bool, JSON] = False,
           hub: Annotated[str | None, typer.Option(help="A Hugging Face Hub id, org/name[@rev]: "
                                                   "show what is read for it, and from "
                                                   "where, instead of the library.")] = None,
           ) -> None:
    """List the bundled model library: shape, KV bytes per token in bf16, and each source.

    With --hub, read one Hub model's config and safetensors headers (never its weights):

      servecap models --hub Qwen/Qwen3-32B
    """
    if hub is not None:
        _hub_model(hub, as_json)
        return
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


def _hub_model(ref: str, as_json: bool) -> None:
    from servecap.model_configs import load_model
    from servecap.model_configs.hub import fetch_report, is_hub_id

    if not is_hub_id(ref):
        raise SpecError("--hub", ref, "a Hub id: org/name or org/name@revision")
    loaded = load_model(ref)
    row = _model_row(loaded.spec)
    if as_json:
        print(json.dumps({**row, "hub": loaded.hub.as_dict() if loaded.hub else None}, indent=2))
        return
    if loaded.hub is None:  # a local directory named like the id shadows it
        print(f"{ref}: the local directory {loaded.path} (it shadows the Hub id)")
        return
    print("\n".join(line.removeprefix("hub: ") for line in fetch_report(loaded.hub)))
    print(f"model: {row['model_type']}, {row['layers']} layers, {row['attention']}, KV "
          f"{fmt_bytes(row['kv_bytes_per_token_bf16'])}/token in bf16")


def _kv_heads(row: dict) -> str:
    """MLA caches one shared latent per token, not per-head K/V: its head count would mislead."""
    return "latent" if row["attention"] == "mla" else str(row["kv_heads"])


def devices(as_json: Annotated[bool, JSON] = False) -> None:
    """List the device catalog: usable bytes as the driver reports them, beside vendor figures.

    Each name is a --device for plan, fit, simulate and workbook (any case). Example:

      servecap devices --json   # byte, bandwidth and FLOPS fields as integers
    """
    # marketing_bytes: the name's GB x 10^9, the key scripts read before nominal_gb (a label
    # times a unit, not the memory's size: usable_bytes is that)
    rows = [{"name": d.name, "label": d.label, "nominal_gb": d.nominal_gb,
             "marketing_bytes": d.nominal_gb * 10**9,
             "usable_bytes": d.usable_bytes, "bandwidth_bytes_per_s": d.bandwidth_bytes_per_s,
             "bf16_flops_per_s": d.bf16_flops_per_s, "fp8_flops_per_s": d.fp8_flops_per_s,
             "fp4_flops_per_s": d.fp4_flops_per_s, "interconnect": d.interconnect,
             "interconnect_bytes_per_s": d.interconnect_bytes_per_s,
             "interconnect_latency_s": d.interconnect_latency_s,
             "p2p_latency_s": d.p2p_latency_s, "source": d.source} for d in DEVICES]
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    cols = ("name", "nominal", "GiB usable", "TB/s", "BF16 TF", "FP8 TF", "link GB/s")
    _print_table("device catalog (nominal: the GB in the vendor's name, a label, not 10^9 B: "
                 "an 80GB H100 carries 80 GiB of HBM3; GiB usable: 2^30 B as CUDA reports them; "
                 "TF = dense TFLOPS; link: one direction)", cols, [
        (d.name, f"{d.nominal_gb:,}GB", f"{d.usable_bytes / GiB:,.2f}",
         _per_tera(d.bandwidth_bytes_per_s, ".2f"), _per_tera(d.bf16_flops_per_s, ",.0f"),
         _per_tera(d.fp8_flops_per_s, ",.0f", "-"), f"{d.interconnect_bytes_per_s / 1e9:,.0f}")
        for d in DEVICES], [(d.name, d.source) for d in DEVICES])


def _print_table(title: str, cols: tuple[str, ...], rows: list[tuple[str, ...]],
                 sources: list[tuple[str, str]]) -> None:
    """A compact table, then each row's source in full below it (too long for a column)."""
    from rich.console import Console
    from rich.table import Table

    from .hanging import print_hanging
    from .narrow import print_table

    table = Table(title=title, title_justify="left")
    widest = max(len(row[0]) for row in rows)
    table.add_column(cols[0], no_wrap=True, min_width=widest)
    for col in cols[1:]:
        table.add_column(col, justify="left" if col in ("type", "attention") else "right")
    for row in rows:
        table.add_row(*row)
    console = Console()
    print_table(console, table, drop=("type", "attention", "KV heads"))
    console.print("sources:")
    for name, source in sources:
        print_hanging(console, f"{name}: {source}")



def _per_tera(value: int | None, spec: str, missing: str = "unknown") -> str:
    return missing if value is None else format(value / 1e12, spec)


def blocks(
    lengths: Annotated[list[int], typer.Argument(help="Live sequence lengths in tokens.")],
    block_size: Annotated[list[int], typer.Option(help="Block size in tokens; repeat to "
                                                  "compare.")] = [16],  # noqa: B006
    shared_prefix: Annotated[int, typer.Option(help="Prefix tokens shared by all.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON (one object per "
                                          "block size).")] = False,
) -> None:
    """Paging arithmetic: blocks, token slots, unused slots and block-table entries.

    Logical tokens count a shared prefix in every sequence; stored tokens count its full
    blocks once, and stored + unused slot tokens = slot tokens.

    Each sequence of S tokens occupies ceil(S / B) blocks of B tokens. Example:

      servecap blocks 17 33 65 --block-size 16 --block-size 4
      # B=16: 10 blocks, 160 slots, 45 unused; B=4: 124 slots, 31 block-table entries
    """
    check_lengths(lengths)
    check_shared_prefix(lengths, shared_prefix)
    reports = [paging_report(list(lengths), b, shared_prefix) for b in block_size]
    keys = ("block_size_tokens", "logical_tokens", "stored_tokens", "num_blocks", "slot_tokens",
            "unused_slot_tokens", "block_table_entries", "shared_blocks")
    rows = [{k: getattr(r, k) for k in keys} for r in reports]
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    from .narrow import print_table

    table = Table(title=f"paging {plural(len(lengths), 'sequence')}, Σ "
                  f"{plural(sum(lengths), 'token')}",
                  caption="logical: each sequence's tokens, a shared prefix counted in each; "
                  "stored: the tokens the slots hold, a shared prefix's full blocks once; "
                  "stored + unused = slot tokens", caption_justify="left")
    for k in keys:
        table.add_column(k.replace("_", " "), justify="right")
    for r in rows:
        table.add_row(*(f"{r[k]:,}" for k in keys))
    # the columns that add up (stored + unused = slot tokens) stay; 9-digit lengths at 80
    # columns leave out the table's entries first
    print_table(Console(), table, drop=("block table entries", "shared blocks"))


def register(app: typer.Typer) -> None:
    for command in (models, devices, blocks):
        app.command()(handle_errors(command))
