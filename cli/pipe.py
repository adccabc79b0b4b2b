"""stdout that survives its reader leaving: `servecap plan ... | head -1` exits as the command
would have, quietly (the Python docs' note on SIGPIPE in the signal module: point stdout at
os.devnull once the pipe is broken)."""

import functools
import os
import sys
from collections.abc import Callable

from .line_ends import TrimmedLines


class QuietPipe:
    """sys.stdout (or stderr) for a run: once the reader has gone (a write or flush raises
    BrokenPipeError), the rest of the output goes to os.devnull and the command runs on to
    exit with its own code (0: it fits). click would exit 1 on the broken pipe, which in
    servecap's exit codes means 'does not fit'."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._discard()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._discard()

    def _discard(self) -> None:
        """The stream's descriptor pointed at os.devnull; what it still buffers goes there."""
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, self._stream.fileno())
        finally:
            os.close(devnull)
        try:
            self._stream.flush()
        except OSError:
            pass

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def _is_terminal(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def quiet_pipe(func: Callable) -> Callable:
    """Run func with stdout and stderr QuietPipes (`2>&1 | head -1` closes both), stdout's
    lines without trailing spaces unless it is a terminal (line_ends.py), flushed
    before it returns, raises or exits (the last of the output would otherwise meet the
    closed pipe at the interpreter's exit)."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        streams = sys.stdout, sys.stderr
        if isinstance(streams[0], QuietPipe | TrimmedLines):
            return func(*args, **kwargs)
        out = QuietPipe(streams[0])
        if not _is_terminal(streams[0]):  # a terminal shows no trailing space; a file keeps it
            out = TrimmedLines(out)
        sys.stdout, sys.stderr = pipes = out, QuietPipe(streams[1])
        try:
            return func(*args, **kwargs)
        finally:
            for pipe in pipes:
                pipe.flush()
            if (sys.stdout, sys.stderr) == pipes:
                sys.stdout, sys.stderr = streams
    return wrapper
