"""Turn domain errors into one stderr line and an exit code; never a traceback."""

import functools
import sys
from collections.abc import Callable

import typer

from servecap.ledger.errors import SpecError

EXIT_OK, EXIT_DOES_NOT_FIT, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports Ctrl-C


def fail(message: str, code: int = EXIT_USAGE) -> typer.Exit:
    print(f"servecap: error: {message}", file=sys.stderr)
    return typer.Exit(code)


def handle_errors(func: Callable) -> Callable:
    """Every command body runs inside this: SpecError -> exit 2 with its one line."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except SpecError as exc:
            from .file_errors import by_flag, in_file

            raise fail(in_file(by_flag(exc)).line()) from None
        except (ArithmeticError, RecursionError, MemoryError) as exc:
            # the last net for a magnitude no check caught: one line, never a traceback
            raise fail(f"an input is beyond what can be computed with ({exc.__class__.__name__}: "
                       f"{str(exc)[:120]}); check the sizes and counts given") from None
        except KeyboardInterrupt:
            raise fail("interrupted", EXIT_INTERRUPTED) from None

    return wrapper
