"""Regenerate every example output in README.md and docs/ from the program, or check that none
has drifted.

A generated block is a fenced code block right after a marker line:

    <!-- output: servecap fit teaching-7b --context 4096 | columns=80 | lines=1 -->

The block becomes `$ servecap ...`, then what the command prints at that terminal width
(columns, default 100), its first `lines` lines when given, and `(exit N)` when it exits
non-zero. A figure that depends on the machine (verify's measurements, bench/ timings) is a
`measured:` marker instead, regenerated only with --measured and stamped with the date and the
machine:

    <!-- measured 2026-12-01 on a 2-core shared VM, no GPU: servecap verify tiny-llama ... -->

    python tools/regen_docs.py            # rewrite the deterministic blocks in place
    python tools/regen_docs.py --check    # exit 1 with a diff when one has drifted (CI)
    python tools/regen_docs.py --measured --machine "2-core shared VM, no GPU"
"""

import argparse
import datetime
import difflib
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ("README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")))
MARKER = re.compile(r"^<!-- (?:output|measured (?P<stamp>[^:]*)): "
                    r"(?P<spec>(?:servecap|python) .*) -->$")
END = "<!-- end output -->"  # closes a block printed as markdown itself (a bench/ table)
DEFAULT_COLUMNS = 100


def run(spec: str) -> str:
    """The block's text: the command as typed, then its output at the marker's width (a
    `python` script's output alone: it prints markdown)."""
    parts = [p.strip() for p in spec.split(" | ")]
    options = dict(p.split("=", 1) for p in parts[1:])
    unknown = options.keys() - {"columns", "lines"}
    if unknown:
        raise SystemExit(f"regen_docs: unknown marker option {sorted(unknown)} in {spec!r}")
    if parts[0].startswith("python "):
        return _script(parts[0], options)
    from typer.testing import CliRunner

    from servecap.cli.app import app

    argv = shlex.split(parts[0])[1:]
    env = {"COLUMNS": options.get("columns", str(DEFAULT_COLUMNS)), "TERM": "dumb"}
    result = CliRunner().invoke(app, argv, env=env)
    lines = [line.rstrip() for line in (result.stdout + result.stderr).splitlines()]
    if "lines" in options:
        lines = lines[:int(options["lines"])]
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise SystemExit(f"regen_docs: {parts[0]!r} raised {result.exception!r}")
    tail = [f"(exit {result.exit_code})"] if result.exit_code else []
    return "\n".join([f"$ {parts[0]}", *lines, *tail])


def _script(command: str, options: dict) -> str:
    argv = [sys.executable, *shlex.split(command)[1:]]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env=os.environ | {"COLUMNS": options.get("columns", "100")})
    if done.returncode:
        raise SystemExit(f"regen_docs: {command!r} exited {done.returncode}: "
                         f"{done.stderr.strip()[-300:]}")
    lines = [line.rstrip() for line in done.stdout.splitlines()]
    return "\n".join(lines[:int(options["lines"])] if "lines" in options else lines)


def _block_end(lines: list[str], i: int) -> tuple[int, bool] | None:
    """(index of the block's last line, fenced?) for the marker at i, None without a block."""
    if i + 1 < len(lines) and lines[i + 1].startswith("```"):
        return next(j for j in range(i + 2, len(lines)) if lines[j].startswith("```")), True
    end = next((j for j in range(i + 1, len(lines)) if lines[j] == END), None)
    return (end, False) if end is not None else None


def regenerate(text: str, measured: str | None) -> str:
    """The document with each marked block replaced; measured blocks only when `measured`
    (the new stamp) is given."""
    lines, out, i = text.split("\n"), [], 0
    while i < len(lines):
        out.append(lines[i])
        match = MARKER.match(lines[i])
        block = _block_end(lines, i) if match else None
        if block is None:
            i += 1
            continue
        end, fenced = block
        if match["stamp"] is not None and measured is None:
            out.extend(lines[i + 1:end + 1])
        else:
            if match["stamp"] is not None:
                out[-1] = f"<!-- measured {measured}: {match['spec']} -->"
            text = run(match["spec"])
            out.extend([lines[i + 1], text, lines[end]] if fenced else [text, lines[end]])
        i = end + 1
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="diff, do not write; exit 1 on "
                        "drift")
    parser.add_argument("--measured", action="store_true", help="also rerun the measured "
                        "blocks, stamped with today's date and --machine")
    parser.add_argument("--machine", default=f"{os.cpu_count()} CPUs, no GPU",
                        help="the machine the measured blocks ran on, in words")
    args = parser.parse_args()
    stamp = f"{datetime.date.today():%Y-%m-%d} on {args.machine}" if args.measured else None
    drifted = 0
    for name in DOCS:
        path = ROOT / name
        old = path.read_text(encoding="utf-8")
        new = regenerate(old, stamp)
        if new == old:
            continue
        drifted += 1
        if args.check:
            sys.stdout.writelines(difflib.unified_diff(
                old.splitlines(True), new.splitlines(True), f"{name} (in the tree)",
                f"{name} (as the program prints it)"))
        else:
            path.write_text(new, encoding="utf-8")
            print(f"regenerated {name}")
    if args.check and drifted:
        print(f"\n{drifted} document(s) drifted from the program: run "
              "python tools/regen_docs.py", file=sys.stderr)
    return 1 if args.check and drifted else 0


if __name__ == "__main__":
    sys.exit(main())
