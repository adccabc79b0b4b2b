"""Every command's --help examples paste as the commands they are at 80 columns: a command too
long for the terminal wraps between words with a trailing ` \\` and indented continuation
lines, never back to column 1 and never inside a word; and an option's help keeps each of
its words (num_gpu_blocks_override, a CSV header) whole on one line."""

import inspect
import re

import pytest
from typer.testing import CliRunner

from servecap.cli.app import COMMANDS, app, load_command
from servecap.cli.help_width import wrap_example

WIDTH = 80


def commands(lines: list[str]) -> list[list[str]]:
    """The example commands among help lines: an indented `servecap ...` line and the lines
    its trailing backslashes continue, as shell words (a `# comment` cut)."""
    found, pending = [], None
    for line in lines:
        text = line.strip()
        if pending is not None:
            pending.append(text)
        elif line[:1].isspace() and text.startswith("servecap "):
            pending = [text]
        else:
            continue
        if not text.endswith("\\"):
            joined = " ".join(part.removesuffix("\\") for part in pending)
            found.append(re.split(r"\s#", joined)[0].split())
            pending = None
    return found


def help_text(name: str, width: int) -> str:
    result = CliRunner().invoke(app, [name, "--help"], env={"COLUMNS": str(width)})
    assert result.exit_code == 0, result.output
    return result.stdout


def description(text: str) -> list[str]:
    """The help's prose and examples: after the Usage line, before the first panel; typer's
    one-column margin taken off."""
    lines = text.split("╭")[0].splitlines()
    return [line[1:].rstrip() for line in lines]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_help_examples_paste_whole_at_80_columns(name: str) -> None:
    source = inspect.cleandoc(load_command(name).help or "").splitlines()
    shown = description(help_text(name, WIDTH))
    assert max(map(len, help_text(name, WIDTH).splitlines())) <= WIDTH
    # the same commands, word for word, as the docstring gives them
    assert commands(shown) == commands(source)
    # no piece of a command lands at the margin: every line after one ending in ` \` is
    # indented, and an indented line that is not a command, a comment or a continuation
    # follows nothing that would have continued it
    for before, line in zip(shown, shown[1:], strict=False):
        if before.rstrip().endswith("\\"):
            assert line[:1].isspace() and line.strip(), (before, line)
    for line in shown:
        if line.rstrip().endswith("\\"):
            assert line.rstrip().endswith(" \\"), line
    # a line indented under a command that did not end in ` \` is a piece the shell would
    # run as a command of its own (fit's examples read that way)
    for before, line in zip(shown, shown[1:], strict=False):
        under = line[:1].isspace() and _indent(line) > _indent(before) and before.strip()
        if under and before.strip().startswith("servecap ") or under and _indent(before) > 2:
            assert before.rstrip().endswith(" \\"), (before, line)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def test_a_long_example_wraps_between_words_with_a_continuation() -> None:
    line = "  servecap plan --device h100-80gb -- vllm serve ./model-dir -tp 2 " \
           "--max-model-len 8k   # a launch line, its flags read as vLLM reads them"
    wrapped = wrap_example(line, 60)
    assert all(len(piece) <= 60 for piece in wrapped)
    # too long to stay at the end: above the command, as shell comments
    assert wrapped[0] == "  # a launch line, its flags read as vLLM reads them"
    long_comment = wrap_example("  servecap plan x  # " + "word " * 12, 30)
    assert len(long_comment) == 4 and long_comment[-1] == "  servecap plan x"
    assert all(x.startswith("  # ") and len(x) <= 30 for x in long_comment[:-1])
    assert all(piece.endswith(" \\") for piece in wrapped[1:-1])
    assert all(piece.startswith("      ") for piece in wrapped[2:])
    assert " ".join(p.strip().removesuffix("\\").strip() for p in wrapped[1:]).split() == \
        line.split("#")[0].split()
    assert "--max-model-len 8k" in wrapped[-1]  # a flag stays with its value


def test_a_comment_that_fits_stays_at_the_end() -> None:
    wrapped = wrap_example("  servecap fit teaching-7b --context 4096 --concurrency 16 "
                           "--find tp   # smallest", 50)
    assert wrapped[-1].endswith("  # smallest") and len(wrapped[-1]) <= 50
    assert wrapped[0].endswith(" \\")


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_option_help_words_stay_whole_at_80_columns(name: str) -> None:
    """num_gpu_blocks_override and arrival_s,prompt_tokens,output_tokens were split across
    two lines (`num_gpu_blocks_o` / `verride`) in simulate, sweep and verify."""
    lines = help_text(name, WIDTH).splitlines()
    for param in load_command(name).params:
        if getattr(param, "hidden", False) or not getattr(param, "help", None):
            continue
        for word in re.sub(r"\[[^\]]*\]", " ", param.help).split():
            assert any(word in line for line in lines), (param.name, word)


def test_a_comment_stays_on_its_own_commands_last_line() -> None:
    """plan --help at 80 columns put '# 117 requests' on a line of its own between the 8B
    example and the teaching-7b one it belongs to, where it read as the 8B's. A comment that
    fits after the command's wrapped last line goes there, words moved down to make room."""
    wrapped = wrap_example("   servecap plan teaching-7b --device 80GiB --safety 10% "
                           "--runtime-peak 0   # 117 requests", 80)
    assert wrapped == ["   servecap plan teaching-7b --device 80GiB --safety 10% \\",
                       "       --runtime-peak 0  # 117 requests"]
    text = help_text("plan", 80)
    assert not [line for line in text.splitlines() if line.strip().startswith("#")]
