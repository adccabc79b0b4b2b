"""An entry of a list printed under a table (a source, a log line read) wrapped with a hanging
indent: its wrapped lines sit deeper than its first, so each entry stands out. rich is
imported when a line is printed, never by importing this module (a command's JSON path
loads no rich)."""


def print_hanging(console, text: str, indent: int = 2, hang: int = 4) -> None:
    """`text` wrapped to the rich `console`, its first line at `indent`, the rest at `hang`."""
    from rich.text import Text

    lines = Text(text, overflow="fold").wrap(console, max(console.width - hang, 20))
    for i, line in enumerate(lines):
        console.print(" " * (hang if i else indent) + line.plain.rstrip(), highlight=False,
                      markup=False, soft_wrap=True)
