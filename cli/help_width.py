"""--help at any width: option names are never cut, their help text wraps instead, and a
command's prose reflows to the terminal rather than keeping its source line breaks."""

from rich.table import Table
from rich.text import Text


class OptionsTable(Table):
    """typer's options table with the name columns kept whole: every column but the last two
    (the type and the help) is no-wrap, so rich narrows only the type and help columns, and a
    help word longer than its column (a CSV header, a path) folds onto the next line rather
    than ending in an ellipsis."""

    def add_row(self, *cells, **kwargs) -> None:
        if cells:  # the help: a Text, or typer's Columns of Texts (help, default, envvar)
            for text in getattr(cells[-1], "renderables", [cells[-1]]):
                if isinstance(text, Text):
                    text.overflow = "fold"
        super().add_row(*cells, **kwargs)
        for column in self.columns[:-2]:
            column.no_wrap = True


def reflow(paragraphs: list[str], markup_mode: str = "rich") -> str:
    """A docstring's paragraphs with their single line breaks made spaces, so the terminal
    wraps them; a paragraph with an indented line (an example) or starting with \\b keeps its
    lines as written, and a short heading line ('Examples:') keeps a line of its own."""
    def join(paragraph: str) -> str:
        lines = paragraph.split("\n")
        if paragraph.startswith("\b") or any(line[:1].isspace() for line in lines):
            return paragraph
        out = ""
        for line in (line.strip() for line in lines):
            heading = line.endswith(":") and len(line) <= 30
            out += ("\n" if heading and out else " " if out else "") + line
        return out
    return "\n\n".join(join(p) for p in paragraphs)


def keep_option_names() -> None:
    """Make typer's help panels build OptionsTable and reflow prose (idempotent)."""
    from typer import rich_utils

    rich_utils.Table = OptionsTable
    rich_utils._fix_linebreaks = reflow
