"""README.md's examples name real commands with flags those commands take, and its doc links
point at files: a renamed flag or a moved doc fails here, not in a new user's shell."""

import re
import shlex
from pathlib import Path

import pytest

from servecap.cli.app import COMMANDS, load_command

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def examples() -> list[str]:
    """Every `servecap ...` line of a code block, continuation lines joined, comments cut."""
    found, pending = [], ""
    for line in README.splitlines():
        match = re.match(r"^(?:    |\$ )(servecap .*)$", line)
        if pending:
            text = pending + line.strip()
        elif match:
            text = match.group(1)
        else:
            continue
        pending = text[:-1] + " " if text.endswith("\\") else ""
        if not pending:
            found.append(re.split(r"\s+#", text)[0].strip())
    return found


def test_the_readme_has_examples_for_every_command() -> None:
    named = {shlex.split(cmd)[1] for cmd in examples()}
    assert set(COMMANDS) - {"speculate"} <= named, set(COMMANDS) - named


@pytest.mark.parametrize("example", examples())
def test_each_example_parses(example: str) -> None:
    argv = shlex.split(example)[1:]
    assert argv[0] in COMMANDS, argv[0]
    command = load_command(argv[0])
    command.make_context(argv[0], argv[1:], resilient_parsing=True)  # unknown flags raise
    own = argv[1:argv.index("--")] if "--" in argv else argv[1:]  # after --: a vLLM line
    flags = {a.split("=")[0] for a in own if a.startswith("-")}
    known = {opt for p in command.params for opt in (*p.opts, *p.secondary_opts)}
    assert flags <= known, flags - known


def test_doc_links_resolve() -> None:
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README):
        if not target.startswith("http"):
            assert (ROOT / target).exists(), target
