"""`servecap models` and `servecap devices` list each row's source below the table; a source
longer than the terminal wraps with a hanging indent, where its wrapped lines began at column
0 and read as new entries."""

import pytest


@pytest.mark.parametrize("command", ["models", "devices"])
def test_each_source_starts_at_two_and_wraps_at_four(run, command) -> None:
    lines = run(command).stdout.splitlines()
    sources = lines[lines.index("sources:") + 1:]
    assert sources and all(len(line) <= 80 for line in sources), sources
    starts = [line for line in sources if not line.startswith("    ")]
    assert all(line.startswith("  ") and line[2] != " " and ":" in line for line in starts), \
        starts
    assert len(starts) < len(sources)  # some source wrapped, onto indented lines
