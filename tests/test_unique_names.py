"""pytest's default import mode needs test basenames unique across folders."""

from collections import Counter
from pathlib import Path


def test_test_file_basenames_are_unique() -> None:
    names = Counter(p.name for p in Path(__file__).parent.rglob("test_*.py"))
    assert [n for n, count in names.items() if count > 1] == []
