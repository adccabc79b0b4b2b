"""Sizes parse in binary and decimal units, and anything else is a clear error."""

import pytest

from servecap.ledger.errors import SpecError
from servecap.ledger.units import (
    decimal_size_note,
    fmt_bytes,
    fmt_gib,
    parse_fraction_or_size,
    parse_size,
)


@pytest.mark.parametrize(("text", "expected"), [
    ("40GiB", 40 * 2**30), ("40 GiB", 40 * 2**30), ("80GB", 80 * 10**9),
    ("512MiB", 512 * 2**20), ("1234", 1234), ("0.5GiB", 2**29), ("3 gib", 3 * 2**30),
    ("2TB", 2 * 10**12), ("16KiB", 16384),
])
def test_parse_size(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["40 gigs", "GiB", "", "-3GiB", "1.5", "40GiBs", "4 0GiB"])
def test_bad_sizes_name_the_value_and_what_is_allowed(text: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_size(text, "--device")
    assert "--device" in str(err.value) and "40GiB" in str(err.value)


def test_fraction_of_device() -> None:
    assert parse_fraction_or_size("10%", 80 * 2**30, "--safety") == (8 * 2**30, 0.10)
    assert parse_fraction_or_size("4GiB", 80 * 2**30, "--safety") == (4 * 2**30, None)
    with pytest.raises(SpecError):
        parse_fraction_or_size("150%", 80 * 2**30, "--safety")


def test_labels_match_divisors() -> None:
    assert fmt_gib(14_000_000_000) == "13.04 GiB"
    assert fmt_bytes(131_072) == "128 KiB"
    assert fmt_bytes(536_870_912) == "512 MiB"


@pytest.mark.parametrize("parse", [parse_size,
                                   lambda text, field: parse_fraction_or_size(text, 10**9, field)])
def test_a_bare_unit_letter_asks_binary_or_decimal(parse):
    with pytest.raises(SpecError) as err:
        parse("3G", "--runtime-peak")
    assert "did you mean 3GiB (2^30) or 3GB (10^9)?" in str(err.value)


def test_a_decimal_device_size_is_said_with_its_binary_spelling() -> None:
    note = decimal_size_note("40GB")
    assert "40,000,000,000 B = 37.25 GiB" in note and "write 40GiB" in note
    assert decimal_size_note("0.5TB").startswith("device '0.5TB' is decimal: 500,000,000,000 B")
    for binary_or_name in ("40GiB", "h100-80gb", "42949672960", ""):
        assert decimal_size_note(binary_or_name) == ""
