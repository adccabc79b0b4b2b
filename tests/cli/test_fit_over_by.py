"""fit's 'binds' line says how far past the device the next candidate goes in a unit that
shows it: one token past the longest context that fits is a block of KV, which read
'over by 0.00 GiB' (over, by nothing)."""

import re


def test_a_small_overshoot_is_not_printed_as_zero(run) -> None:
    result = run("fit", "llama-3.1-8b", "--device", "24GiB", "--find", "context")
    assert result.exit_code == 0, result.output
    over = re.search(r"over by ([0-9.,]+) (GiB|MiB|KiB|B)\b", result.stdout)
    assert over is not None, result.stdout
    assert float(over.group(1).replace(",", "")) > 0 and over.group(2) != "GiB"


def test_a_large_overshoot_stays_in_gib(run) -> None:
    result = run("fit", "llama-3.1-70b-instruct", "--device", "h100-80gb", "--context", "32768",
                 "--concurrency", "16", "--find", "gpus")
    assert result.exit_code == 0, result.output
    assert "over by 4.06 GiB" in result.stdout
