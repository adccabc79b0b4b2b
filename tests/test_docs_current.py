"""The example outputs in README.md and docs/ are what the program prints today:
tools/regen_docs.py regenerates every marked block, and here nothing may change."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import regen_docs  # noqa: E402


def test_regenerating_the_docs_changes_nothing() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "regen_docs.py"), "--check"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr


def test_a_drifted_block_is_rewritten_and_a_measured_one_kept() -> None:
    doc = ("<!-- output: servecap blocks 17 --block-size 16 | columns=80 | lines=1 -->\n"
           "```\n$ servecap blocks 17\nstale\n```\n"
           "<!-- measured 2026-01-01 on somewhere: servecap verify tiny-llama -->\n"
           "```\nkept as measured\n```\n")
    new = regen_docs.regenerate(doc, measured=None)
    assert "stale" not in new and "paging 1 sequence, Σ 17 tokens" in new
    assert "kept as measured" in new and "2026-01-01 on somewhere" in new


def test_every_marked_block_names_a_command() -> None:
    marked = [line for name in regen_docs.DOCS
              for line in (ROOT / name).read_text().splitlines()
              if line.startswith("<!-- output") or line.startswith("<!-- measured")]
    assert len(marked) >= 10
    assert all(regen_docs.MARKER.match(line) for line in marked), marked
