"""Options coerced without a pydantic validator where typer's would hand the value back as it
is: typer (0.22 and later) builds a pydantic TypeAdapter for every option of a command as it
parses, given or not (55 of them for `servecap simulate`, 0.02 CPU-s of its start-up), though
an option left at None, a str, or an int or float default already of its type comes out of
that validator unchanged. A deferred option returns those values itself and builds typer's own
coercion for anything else (a number typed on the command line, a list), so every value that
can be refused is checked, and refused, by typer's own code and messages.

A Path typed on the command line is made by the same call pydantic's Path validator makes,
Path(text), and then goes through typer's own path checks (exists, dir_okay, ...), where
the path's text is the text typed (else typer's own coercion runs, as its messages quote it)."""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer

# the typer minor release whose private coercion layer (typer._coercion) this follows; under
# any other typer nothing is deferred and typer coerces every option itself (slower, the same
# values): a private layer may change in any release
TYPER_FOLLOWED = (0, 29)

try:  # typer's coercion layer (typer >= 0.22); older typers coerce through click's types
    from typer._coercion import RuntimeParam, TypeDescriptor, build_runtime_param
    from typer._param_types import coerce_cli_path
except ImportError:  # pragma: no cover - older typer: nothing to defer
    RuntimeParam = None
if tuple(int(part) for part in typer.__version__.split(".")[:2]) != TYPER_FOLLOWED:
    RuntimeParam = None  # pragma: no cover - another typer: nothing deferred

_AS_GIVEN = (str, int, float)  # the annotations whose validator returns a value of that type


def defer_command(command) -> None:
    """Defer the coercion of the command's options, its -h/--help (made as it parses) too."""
    if RuntimeParam is None:
        return
    defer(command.params)
    help_option = command.get_help_option

    def deferred_help(ctx):
        option = help_option(ctx)
        defer([] if option is None else [option])
        return option
    command.get_help_option = deferred_help


def defer(params: list) -> None:
    """Give each of typer's options a deferred coercion (before the command line is parsed)."""
    if RuntimeParam is None:
        return
    for param in params:
        descriptor = getattr(param, "type_descriptor", None)
        if descriptor is not None and getattr(param, "_runtime_param", 1) is None:
            param._runtime_param = _Deferred(descriptor.parameter_info, descriptor.annotation,
                                             descriptor)


if RuntimeParam is not None:
    @dataclass(frozen=True)
    class _Deferred(RuntimeParam):
        """typer's RuntimeParam.coerce (None -> None or (), a str where several values are
        wanted refused) with the value itself returned where the validator would return it."""

        descriptor: TypeDescriptor

        def _coerce_value(self, value: Any, param, ctx) -> Any:
            info, annotation = self.parameter_info, self.annotation
            plain = self.descriptor.file_annotation is None and info.parser is None
            if plain and annotation in _AS_GIVEN and type(value) is annotation \
                    and info.min is None and info.max is None:
                return value
            if plain and annotation is Path and info.path_type is None \
                    and type(value) is str:
                path = Path(value)
                if str(path) == value:  # typer's messages then name it as typed
                    return coerce_cli_path(path, info, path_type=Path, param=param, ctx=ctx)
            param._runtime_param = build_runtime_param(self.descriptor)
            return param._runtime_param._coerce_value(value, param=param, ctx=ctx)
