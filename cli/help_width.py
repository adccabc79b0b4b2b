"""--help at any width: option names are never cut, their help text wraps instead, and a
command's prose reflows to the terminal rather than keeping its source line breaks; an example
command too long for the terminal wraps between its words with a ` \\` continuation, so it
still pastes as one command."""

import copy
import re
from dataclasses import replace

from rich.table import Table
from rich.text import Text

CONTINUATION = " \\"
CONTINUATION_INDENT = 4  # a wrapped command's next lines sit this much deeper, as fit's do
# a shell word: quoted runs kept whole, so a wrap never lands inside a quoted argument
_WORD = re.compile(r"""(?:'[^']*'|"[^"]*"|[^\s'"])+""")
_SENTENCE_END = (".", ":", "!", "?")
# below this many columns of help text the names are stacked, as for a word that does not
# fit: side by side, --compare-simulate and --no-compare-simulate left 20 columns at 80
MIN_HELP_WIDTH = 32


class OptionsTable(Table):
    """typer's options table with the name columns kept whole: every column but the last two
    (the type and the help) is no-wrap, so rich narrows only the type and help columns. When
    that leaves the help column narrower than a word of its text (an identifier such as
    num_gpu_blocks_override, a CSV header), the names are stacked into one column instead (a
    --no- form under its flag, then each alias on a line of its own) until the word fits, or
    while the help column is narrower than MIN_HELP_WIDTH and stacking widens it; a word
    wider than even that folds onto the next line rather than ending in an ellipsis."""

    def add_row(self, *cells, **kwargs) -> None:
        if cells:  # the help: a Text, or typer's Columns of Texts (help, default, envvar)
            for text in _texts(cells[-1]):
                text.overflow = "fold"
        super().add_row(*cells, **kwargs)
        for column in self.columns[:-2]:
            column.no_wrap = True

    def __rich_console__(self, console, options):
        table = self
        if len(self.columns) >= 6:  # typer's layout: the four name columns, type and help
            try:
                for level in (1, 2):
                    room = table._help_room(console, options)
                    if room >= max(self._longest_word(), MIN_HELP_WIDTH):
                        break
                    stacked = self._stack(level)
                    if stacked._help_room(console, options) > room:  # only where it widens
                        table = stacked
            except (AttributeError, TypeError):  # a rich without these internals: its own
                table = self  # layout, every name still there
        yield from Table.__rich_console__(table, console, options)

    def _help_room(self, console, options) -> int:
        """The help column's width for text at these widths."""
        widths = self._calculate_column_widths(
            console, options.update_width(options.max_width - self._extra_width))
        return widths[-1] - self._get_padding_width(len(self.columns) - 1)

    def _longest_word(self) -> int:
        return max((len(word) for cell in self.columns[-1]._cells for text in _texts(cell)
                    for word in text.plain.split()), default=0)

    def _stack(self, level: int) -> "OptionsTable":
        """A copy with typer's four name columns (long, short, --no- long, --no- short) made
        one: level 1, a row's names on one line and its --no- forms on the next; level 2,
        every alias on a line of its own."""
        names = self.columns[-6:-2]
        merged = []
        for row in zip(*(column._cells for column in names), strict=True):
            lines = [_joined(row[0], row[1]), _joined(row[2], row[3])]
            if level > 1:
                lines = [part for line in lines for part in line.split(",")]
            merged.append(Text("\n").join(line for line in lines if line.plain))
        table = copy.copy(self)
        table.columns = [*self.columns[:-6], replace(names[0], _cells=merged),
                         *self.columns[-2:]]
        return table


def _texts(cell) -> list[Text]:
    """The Texts of a help cell: itself, or the items of typer's Columns."""
    return [t for t in getattr(cell, "renderables", [cell]) if isinstance(t, Text)]


def _joined(first, second) -> Text:
    """Two name cells (Text or str) as one line, a space between when both are given."""
    parts = [part if isinstance(part, Text) else Text(str(part)) for part in (first, second)]
    return Text(" ").join(part for part in parts if part.plain)


def reflow(paragraphs: list[str], markup_mode: str = "rich", width: int | None = None) -> str:
    """A docstring's paragraphs with their single line breaks made spaces, so the terminal
    wraps them; a paragraph with an indented line (an example) or starting with \\b keeps its
    lines as written (an indented command wider than the terminal wrapped by wrap_example),
    and a short heading line ('Examples:') after a finished sentence keeps a line of its own
    (the last words of a sentence that runs on join it). width: the columns the
    help text has (None: the terminal's, less typer's one-column margin each side)."""
    if width is None:
        from typer import rich_utils

        width = rich_utils._get_rich_console().width - 2

    def join(paragraph: str) -> str:
        lines = paragraph.split("\n")
        if paragraph.startswith("\b") or any(line[:1].isspace() for line in lines):
            return "\n".join(wrap_examples(lines, width))
        out = ""
        for line in (line.strip() for line in lines):
            # a heading stands alone after a finished sentence; the last words of one that
            # runs on ('... with its 95 %' / 'interval. Example:') join it
            heading = line.endswith(":") and len(line) <= 30 and out.endswith(_SENTENCE_END)
            out += ("\n" if heading else " " if out else "") + line
        return out
    return Reflowed("\n\n".join(join(p) for p in paragraphs))


class Reflowed(str):
    """reflow's text, already dedented: typer dedents the help again when it makes it rich
    text (inspect.cleandoc), which, when every line after the first is indented (a last
    paragraph of examples), would take the examples' indentation off."""


def wrap_examples(lines: list[str], width: int) -> list[str]:
    """An example paragraph's lines, each command (an indented line and the lines its
    trailing backslashes continue) kept as written when every line fits in `width`, else
    joined and wrapped again by wrap_example."""
    out, i = [], 0
    while i < len(lines):
        group = [lines[i]]
        while group[-1].rstrip().endswith("\\") and i + len(group) < len(lines):
            group.append(lines[i + len(group)])
        i += len(group)
        if not group[0][:1].isspace() or max(len(line) for line in group) <= width:
            out += group
            continue
        indent = len(group[0]) - len(group[0].lstrip())
        joined = " ".join(line.strip().removesuffix("\\").strip() for line in group[:-1])
        out += wrap_example(" " * indent + f"{joined} {group[-1].strip()}".strip(), width)
    return out


def wrap_example(line: str, width: int) -> list[str]:
    """One indented command line as lines of at most `width` columns: broken only between
    shell words (a flag kept with its value), each line but the last ending in ` \\`, the next
    ones CONTINUATION_INDENT deeper. A trailing `# comment`
    stays at the end when it fits there, else goes on lines of its own above the command,
    where a shell reads it as a comment still. A single word wider than the line is kept
    whole on a line of its own."""
    indent = len(line) - len(line.lstrip())
    body = line.strip()
    found = list(_WORD.finditer(body))
    first = next((i for i, m in enumerate(found) if m.group().startswith("#")), len(found))
    comment = body[found[first].start():] if first < len(found) else ""
    words = [m.group() for m in found[:first]]
    ends_continued = bool(words) and words[-1] == "\\"
    words = words[:-1] if ends_continued else words
    deeper = " " * (indent + CONTINUATION_INDENT)
    lines: list[list[str]] = [[]]
    for word in _units(words, width - len(deeper) - len(CONTINUATION)):
        if lines[-1] and len(_line(lines, indent, deeper)) + 1 + len(word) + \
                len(CONTINUATION) > width:
            lines.append([])
        lines[-1].append(word)
    if not words:  # a comment alone
        return _comment_lines(comment, indent, width) + [" " * indent]
    if comment and not ends_continued:
        # the comment on the command's own last line, words moved down to make room, so it
        # never sits between two commands where it reads as the one above's
        tried = [list(line) for line in lines]
        moved: list[str] = []
        while len(_line(tried, indent, deeper)) + 2 + len(comment) > width and \
                len(tried[-1]) > 1:
            moved.insert(0, tried[-1].pop())
        if moved:
            tried.append(moved)
        if len(_line(tried, indent, deeper)) + 2 + len(comment) <= width:
            return _pieces(tried, indent, deeper, "  " + comment)
    pieces = _pieces(lines, indent, deeper, CONTINUATION if ends_continued else "")
    return _comment_lines(comment, indent, width) + pieces


def _line(lines: list[list[str]], indent: int, deeper: str) -> str:
    """The last of `lines` as printed: at the command's indent if it is the first, else
    deeper."""
    return (" " * indent if len(lines) == 1 else deeper) + " ".join(lines[-1])


def _pieces(lines: list[list[str]], indent: int, deeper: str, end: str) -> list[str]:
    """The lines as printed: each but the last ending in the continuation, the last in
    `end`."""
    out = [(" " * indent if i == 0 else deeper) + " ".join(words) for i, words in
           enumerate(lines)]
    return [line + CONTINUATION for line in out[:-1]] + [out[-1] + end]


def _units(words: list[str], room: int) -> list[str]:
    """The words a wrap keeps on one line: a flag and its value (--flops 990TFLOPS) together
    where the pair fits in `room`, every other word alone."""
    units: list[str] = []
    for word in words:
        previous = units[-1] if units else ""
        pair = f"{previous} {word}"
        if previous.startswith("-") and " " not in previous and not word.startswith("-") \
                and len(pair) <= room:
            units[-1] = pair
        else:
            units.append(word)
    return units


def _comment_lines(comment: str, indent: int, width: int) -> list[str]:
    """A `# comment` as lines of at most `width` columns, each a shell comment."""
    if not comment:
        return []
    words, lines, current = comment.lstrip("#").split(), [], "#"
    for word in words:
        if current != "#" and len(current) + 1 + len(word) + indent > width:
            lines.append(" " * indent + current)
            current = "#"
        current += " " + word
    return lines + [" " * indent + current]


def keep_option_names() -> None:
    """Make typer's help panels build OptionsTable and reflow prose (idempotent). A typer
    without these module attributes keeps its own help: a typer release that renames them
    cannot break --help."""
    from typer import rich_utils

    if not all(hasattr(rich_utils, name) for name in ("Table", "_fix_linebreaks",
                                                       "_make_rich_text", "highlighter",
                                                       "_get_rich_console")):
        return
    rich_utils.Table = OptionsTable
    rich_utils._fix_linebreaks = reflow
    _name_value_types()
    if not getattr(rich_utils._make_rich_text, "keeps_reflowed", False):
        rich_utils._make_rich_text = _keeping_reflowed(rich_utils._make_rich_text)


# typer labels a value by its Python annotation (<str>, <list[int]>); the help says what a
# value is in words instead, and a flag, which takes no value, gets no label
VALUE_TYPES = {"str": "TEXT", "int": "INTEGER", "float": "NUMBER", "path": "PATH",
               "file": "FILE", "directory": "DIRECTORY"}
_LABEL = re.compile(r"<(?:list\[)?([a-z]+)\]?>")


def value_type(label: str | None, is_flag: bool = False) -> str | None:
    """The type column's text for typer's label: none for a flag; TEXT, INTEGER, NUMBER,
    PATH for typer's <str>, <int>, <float>, <path> (a repeatable option's <list[int]> is
    INTEGER: its help says it repeats); any other label (a choice, a metavar) as it is."""
    if is_flag:
        return None
    if label is None:
        return None
    return _LABEL.sub(lambda m: VALUE_TYPES.get(m.group(1), m.group(0)), label)


def _name_value_types() -> None:
    """Route typer's option and argument type labels through value_type (idempotent; a
    typer without display_type_rich keeps its own labels)."""
    from typer import core

    for cls in (core.TyperOption, core.TyperArgument):
        labelled = getattr(cls, "display_type_rich", None)
        if labelled is None or getattr(labelled, "names_value_types", False):
            continue

        def display(self, ctx, _labelled=labelled):
            flag = bool(getattr(self, "is_flag", False)) and not getattr(self, "count", False)
            return value_type(_labelled(self, ctx), flag)
        display.names_value_types = True
        cls.display_type_rich = display


def _keeping_reflowed(make_rich_text):
    """typer's _make_rich_text, with reflow's text made rich text as it is (not dedented)."""
    def make(*, text: str, style: str = "", markup_mode: str):
        from typer import rich_utils

        if isinstance(text, Reflowed) and markup_mode == "rich" and "\x1b" not in text:
            return rich_utils.highlighter(Text.from_markup(text, style=style))
        return make_rich_text(text=text, style=style, markup_mode=markup_mode)
    make.keeps_reflowed = True
    return make
