"""Output read through a pipe or saved to a file carries no trailing spaces: rich padded a
table's title to the table's width and a wrapped note to the console's, so a report pasted
into a ticket or diffed against yesterday's held a column of spaces on every line."""

import os
import subprocess
import sys

import pytest

from servecap.cli.line_ends import TrimmedLines


@pytest.mark.parametrize("args", [
    ("blocks", "17", "33", "65", "--block-size", "16", "--block-size", "4"),
    ("plan", "teaching-7b"),
    ("plan", "--help"),
])
def test_piped_output_has_no_trailing_spaces(args) -> None:
    done = subprocess.run([sys.executable, "-m", "servecap.cli", *args], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "COLUMNS": "80"})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) > 5
    padded = [line for line in lines if line != line.rstrip(" ")]
    assert not padded, padded
    # the titles keep their place: a centred title is still indented
    if args[0] == "blocks":
        assert lines[0].startswith("   ") and lines[0].strip().startswith("paging 3")


class _Sink:
    def __init__(self) -> None:
        self.text = ""

    def write(self, text: str) -> int:
        self.text += text
        return len(text)


def test_spaces_inside_a_line_survive_writes_that_split_it() -> None:
    sink = _Sink()
    out = TrimmedLines(sink)
    for piece in ("a  ", "  b   ", "\n", "   \n  c", " ", "\n", "end  "):
        assert out.write(piece) == len(piece)
    assert sink.text == "a    b\n\n  c\nend"
