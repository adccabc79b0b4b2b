"""The servecap typer app: each command lives in its own module, imported only when it runs."""

import importlib
import re
import sys

import typer
from typer import core
from typer.core import TyperGroup

from . import deferred_params, startup_gc

# the click typer runs on: vendored as typer._click since typer 0.22, plain click before
click = getattr(core, "_click", None) or core.click

# command -> (module that registers it, the one line `servecap --help` lists). The line is the
# first paragraph of the command's docstring; tests/cli/test_lazy_app.py keeps the two equal.
COMMANDS = {
    "plan": ("plan_cmd", "Build the per-device memory ledger and the memory-only concurrency "
             "ceiling."),
    "fit": ("fit_cmd", "Answer the inverse questions with plan's ledger: the longest context, "
            "the most requests, the fewest GPUs or the cheapest dtype that fits."),
    "models": ("catalog_cmd", "List the bundled model library: shape, KV bytes per token in "
               "bf16, and each source."),
    "devices": ("catalog_cmd", "List the device catalog: usable bytes as the driver reports "
                "them, beside vendor figures."),
    "blocks": ("catalog_cmd", "Paging arithmetic: blocks, token slots, unused slots and "
               "block-table entries."),
    "pack": ("pack_cmd", "Check that instances share the devices, started in order, under "
             "each engine's rule."),
    "diff": ("diff_cmd", "Compare one deployment under two engines or vLLM releases, line by "
             "line."),
    "reconcile": ("reconcile_cmd", "Plan the deployment a startup log came from and compare "
                  "each figure: residual and advice."),
    "workbook": ("workbook_cmd", "Write a capacity workbook: the ledger as live formulas, the "
                 "envelope over devices x contexts x KV dtypes with a chart, and the review "
                 "sheets."),
    "simulate": ("simulate_cmd", "Simulate the scheduler over a workload: latency percentiles, "
                 "throughput, goodput."),
    "sweep": ("sweep_cmd", "Sweep open-loop offered load; stop when the SLO fails; report "
              "the capacity."),
    "cost": ("cost_cmd", "Self-hosted $ per million output tokens at full load and at "
             "--utilization."),
    "speculate": ("speculate_cmd", "Where speculative decoding helps (low batch, memory-bound) "
                  "and where it stops."),
    "verify": ("verify_cmd", "Measure the plan on the device, line by line; exit 1 when a "
               "ledger line is violated."),
    "search": ("search_cmd", "Search deployments for the cheapest that meets the SLOs at "
               "--rate."),
    "serve": ("serve_cmd", "Serve MODEL on /v1/completions, /v1/chat/completions, /v1/models, "
              "/health, /metrics."),
    "prefix": ("prefix_cmd", "Prefix-cache hit rate of a traffic sample: the prompt tokens vLLM "
               "would find cached."),
    "load": ("load_cmd", "Send a workload to an OpenAI-compatible server; report "
             "TTFT/ITL/TPOT/E2E as simulate does."),
}
CONTEXT = {"help_option_names": ["-h", "--help"]}  # vLLM's and most CLIs' short help flag
_WITH_SUFFIX = re.compile(r"(\d+(?:\.\d+)?)([kKmM])")
_SCALES = {"k": (2**10, 10**3), "m": (2**20, 10**6)}  # '4k': 4096 or 4000; '2M': 2^21 or 2e6
_COMMA_COUNTS = re.compile(r"\d+(?:,\d+)+")  # '17,33,65' typed where counts go apart
# pydantic's words for a value typer could not convert, said once and shorter
_PLAIN = {"Input should be a valid integer, unable to parse string as an integer":
          "not a whole number",
          "Input should be a valid number, unable to parse string as a number": "not a number"}


class LazyGroup(TyperGroup):
    """Lists commands from COMMANDS without importing them; imports one module to run one
    command. Usage errors print one line, not a panel."""

    listing = False

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        deferred_params.defer_command(self)  # --version, -h: no pydantic validator either

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        if self.listing:  # `servecap --help` needs the summary line only
            return core.TyperCommand(cmd_name, help=COMMANDS[cmd_name][1])
        return load_command(cmd_name)

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        from .help_width import keep_option_names

        keep_option_names()  # the commands' panels: a flag gets no <bool> label
        self.listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self.listing = False

    def main(self, args=None, *rest, standalone_mode: bool = True, **kwargs):
        from .pipe import quiet_pipe

        startup_gc.pause()  # until the command runs (cli/startup_gc.py)
        try:
            return quiet_pipe(self._main)(args, *rest, standalone_mode=standalone_mode,
                                          **kwargs)
        finally:
            startup_gc.resume()

    def _main(self, args=None, *rest, standalone_mode: bool = True, **kwargs):
        if not standalone_mode:
            return super().main(args, *rest, standalone_mode=False, **kwargs)
        try:
            code = super().main(args, *rest, standalone_mode=False, **kwargs)
        except click.ClickException as exc:
            if exc.format_message():  # empty after no_args_is_help printed the help
                line = usage_line(exc, list(sys.argv[1:] if args is None else args))
                print(f"servecap: error: {line}", file=sys.stderr)
            sys.exit(exc.exit_code)
        except typer.Abort:
            print("servecap: error: aborted", file=sys.stderr)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


def load_command(name: str) -> click.Command:
    """Import the command's module and build its click command, with the app's settings:
    -h beside --help, and --version."""
    module = importlib.import_module(f".{COMMANDS[name][0]}", __package__)
    holder = typer.Typer(rich_markup_mode="rich", pretty_exceptions_enable=False,
                         add_completion=False, context_settings=CONTEXT)
    module.register(holder)
    command = typer.main.get_group(holder).commands[name]
    command.context_settings = {**CONTEXT, **command.context_settings}
    command.params.append(version_option())
    deferred_params.defer_command(command)  # no pydantic validator for what needs none
    command.format_help = _whole_option_names(command.format_help)
    command.invoke = startup_gc.resumed_first(command.invoke)
    return command


def _whole_option_names(format_help):
    """The command's help rendered with cli/help_width's panels: typer's rich help module is
    imported only when help is shown, never on a command's start-up."""
    def whole(ctx: click.Context, formatter: click.HelpFormatter) -> None:
        from .help_width import keep_option_names

        keep_option_names()
        return format_help(ctx, formatter)
    return whole


def version() -> str:
    """'servecap 0.1.0': the installed distribution's version."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return f"servecap {installed('servecap')}"
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "servecap (not installed)"


def _print_version(value: bool) -> None:
    if value:
        print(version())
        raise typer.Exit(0)


VERSION = typer.Option(False, "--version", is_eager=True, callback=_print_version,
                       help="Print servecap's version and exit.")


def version_option() -> click.Parameter:
    """The --version flag as typer builds it, for a command whose function does not declare
    it."""
    holder = typer.Typer(add_completion=False)

    @holder.command()
    def _probe(version: bool = VERSION) -> None:
        """A command typer builds only to lend its --version option."""

    param = typer.main.get_command(holder).params[0]
    param.expose_value = False  # the command's own function never sees it
    return param


def usage_line(exc: click.ClickException, args: list[str]) -> str:
    """click's message on one line, a huge value elided, the value typed (a hint for '4k'),
    --help named."""
    message = " ".join(exc.format_message().split())
    for words, plain in _PLAIN.items():
        message = message.replace(words, plain)
    if len(message) > 300:
        message = f"{message[:150]}...{message[-120:]}"
    param = getattr(exc, "param", None)
    value = _given(args, getattr(param, "opts", []))
    if value is None and getattr(param, "param_type_name", "") == "argument":
        value = next((a for a in args[1:] if _COMMA_COUNTS.fullmatch(a)), None)
        if value is not None:  # blocks 17,33,65: plan's --lengths spelling, given as LENGTHS
            message += f" (got {value!r}; give them apart: {value.replace(',', ' ')})"
            value = None
    if value is not None and (match := _WITH_SUFFIX.fullmatch(value.strip())):  # '--context 4k'
        binary, decimal = _SCALES[match.group(2).lower()]
        number = float(match.group(1))
        message += (f" (got {value!r}; give a plain integer: did you mean "
                    f"{int(number * binary)} or {int(number * decimal)}?)")
    elif value is not None and getattr(param, "multiple", False) and \
            _COMMA_COUNTS.fullmatch(value):  # --block-size 16,32 on an option that repeats
        flag = param.opts[0]
        message += (f" (got {value!r}; repeat the flag: "
                    + " ".join(f"{flag} {v}" for v in value.split(",")) + ")")
    elif value is not None and not any(quoted in message for quoted in (
            f"'{value}'", f'"{value}"')):  # pydantic's words do not say what was typed: the
        message += f" (got {value[:80]!r})"  # value, as the other errors give it (a letter
        # of the message's own words, 'n' of '--concurrency', is not the value quoted)
    unknown = re.fullmatch(r"No such command '(.+)'\.", message)
    if unknown:  # click suggests options, not commands
        import difflib

        near = difflib.get_close_matches(unknown.group(1), list(COMMANDS), n=3, cutoff=0.6)
        message = message[:-1] + (f" (did you mean {' or '.join(near)}?)" if near else
                                  f"; the commands: {', '.join(COMMANDS)}")
    option = getattr(exc, "option_name", None)  # click's NoSuchOption (typer's own click)
    if option and type(exc).__name__ == "NoSuchOption" and args[:1] and \
            args[0] in LAUNCH_LINE_COMMANDS:
        message = _vllm_flag(option, args[0]) or message
    ctx = getattr(exc, "ctx", None)
    command = ctx.command_path if ctx is not None else " ".join(
        ["servecap", *args[:1]] if args and args[0] in COMMANDS else ["servecap"])
    return f"{message} (see {command} --help)"


LAUNCH_LINE_COMMANDS = ("plan", "diff")  # they read a pasted `vllm serve` line after --


def _vllm_flag(option: str, command: str) -> str | None:
    """A vLLM flag this command has no option for: where it goes instead (a pasted launch
    line, which reads it as vLLM does), or that it changes no GPU memory; None for a flag
    vLLM does not have (click's own words and suggestions stand)."""
    from servecap.scenario.vllm_line import IGNORED_BOOL, IGNORED_VALUE, MODELLED

    if option in MODELLED:
        return (f"No such option: {option}: it is vLLM's; give it in the launch line after "
                f"--, e.g. servecap {command} --device h100-80gb -- vllm serve MODEL {option} "
                "...")
    if option in IGNORED_VALUE or option in IGNORED_BOOL:
        return f"No such option: {option}: vLLM's, and it changes no GPU memory; leave it out"
    return None


def _given(args: list[str], opts: list[str]) -> str | None:
    """The text typed after one of `opts` ('--context 4k' or '--context=4k')."""
    for i, arg in enumerate(args):
        name, eq, after = arg.partition("=")
        if name in opts:
            return after if eq else (args[i + 1] if i + 1 < len(args) else None)
    return None


app = typer.Typer(
    name="servecap",
    cls=LazyGroup,
    help="How many LLM requests fit on this GPU, with what latency, and is that plan true on "
    "the device? Memory is binary: GiB = 2^30 bytes.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    context_settings=CONTEXT,
)


@app.callback()
def _root(_version: bool = VERSION) -> None:
    """The commands are listed from COMMANDS; this only makes typer build a group."""


@startup_gc.frozen_at_exit
def main() -> None:
    app()
