"""vLLM's start advice is said once and wrapped at the terminal: plan printed 'does not start:
vLLM would refuse to start: ...' (the verdict twice) as one 116-character line at 80 columns,
and diff 'B does not start: vLLM would refuse to start: ...'."""

import pytest


@pytest.fixture
def narrow(monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")


def _said_once(text: str) -> None:
    assert "does not start: vLLM would" not in text
    assert all(len(line) <= 80 for line in text.splitlines()), text


def test_plan_says_it_once_within_80_columns(run, narrow) -> None:
    result = run("plan", "llama-3.1-8b", "--device", "24GiB", "--engine", "vllm")
    assert result.exit_code == 1, result.output
    _said_once(result.stdout)
    assert "vLLM would refuse to start: decrease max_model_len to 47,840 (the largest that\n" \
           "fits)" in result.stdout


def test_diff_says_it_once(run, narrow) -> None:
    result = run("diff", "llama-3.1-8b", "--device", "24GiB", "--engine", "vllm==0.19",
                 "--against", "vllm==0.26")
    assert result.exit_code == 1, result.output
    _said_once(result.stdout)
    assert "\nB: vLLM would refuse to start: decrease max_model_len to" in result.stdout
    assert "\nA: vLLM would refuse to start: decrease max_model_len to" in result.stdout
