"""The servecap typer app: each command lives in its own module and registers here."""

import typer

from . import (
    catalog_cmd,
    fit_cmd,
    load_cmd,
    plan_cmd,
    reconcile_cmd,
    search_cmd,
    serve_cmd,
    simulate_cmd,
    verify_cmd,
    workbook_cmd,
)

app = typer.Typer(
    name="servecap",
    help="How many LLM requests fit on this GPU, with what latency, and is that plan true on "
    "the device? Memory is binary: GiB = 2^30 bytes.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)
plan_cmd.register(app)
catalog_cmd.register(app)
reconcile_cmd.register(app)
workbook_cmd.register(app)
simulate_cmd.register(app)
verify_cmd.register(app)
serve_cmd.register(app)
load_cmd.register(app)
fit_cmd.register(app)
search_cmd.register(app)


def main() -> None:
    app()
