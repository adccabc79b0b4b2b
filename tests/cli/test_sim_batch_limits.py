"""simulate never said which max_num_batched_tokens and max_num_seqs it scheduled with: the
release's default differs by device (1,024 sequences on an H100, 256 on an A100 80GB or an
L4; 16,384 tokens on a B200 from v0.28.0), and neither the table nor --json showed it."""

import json

import pytest

from servecap.ledger.vllm_batch import (
    BATCHED_TOKENS,
    HUGE_GPU_TOKENS,
    SEQS_DEFAULT,
    SEQS_DEFAULT_BIG_GPU,
    SERVE,
)

RUN = ("--input-len", "100", "--output-len", "10", "--num-requests", "20")


@pytest.mark.parametrize(("device", "tokens", "seqs", "why"), [
    ("h100-80gb", BATCHED_TOKENS[(True, SERVE)], SEQS_DEFAULT_BIG_GPU,
     "on a >= 70 GiB GPU, not an A100"),
    ("a100-80gb", BATCHED_TOKENS[(False, SERVE)], SEQS_DEFAULT,
     "on an A100, which keeps the smaller GPUs' defaults"),
    ("l4-24gb", BATCHED_TOKENS[(False, SERVE)], SEQS_DEFAULT, "on a smaller GPU"),
    ("b200-180gb", HUGE_GPU_TOKENS, SEQS_DEFAULT_BIG_GPU, "on a >= 160 GiB GPU")])
def test_simulate_json_states_the_release_batch_limits(run, device, tokens, seqs, why) -> None:
    result = run("simulate", "llama-3.1-8b", "--device", device, *RUN, "--json")
    assert result.exit_code == 0, result.output
    batch = json.loads(result.stdout)["batch"]
    assert (batch["max_num_batched_tokens"], batch["max_num_seqs"]) == (tokens, seqs)
    assert why in batch["source"] and "OpenAI server default" in batch["source"]


def test_simulate_table_states_given_and_default_limits(run) -> None:
    result = run("simulate", "llama-3.1-8b", "--device", "h100-80gb", *RUN,
                 "--max-num-seqs", "64")
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    assert (f"batch limits: {BATCHED_TOKENS[(True, SERVE)]:,} tokens and 64 sequences per step, "
            "--max-num-seqs given; otherwise the OpenAI server default") in text


def test_plain_engine_names_the_plan_defaults(run) -> None:
    result = run("simulate", "llama-3.1-8b", "--device", "h100-80gb", *RUN, "--engine",
                 "plain", "--json")
    assert result.exit_code == 0, result.output
    batch = json.loads(result.stdout)["batch"]
    assert batch["source"].startswith("the plan's defaults")


def test_saved_scenario_comments_the_batch_simulate_took(run, tmp_path) -> None:
    """--save-scenario wrote the plain ledger's 256 sequences beside a null max_num_seqs,
    while the run simulated the release's 1,024 on the H100."""
    saved = tmp_path / "s.yaml"
    result = run("simulate", "llama-3.1-8b", "--device", "h100-80gb", *RUN,
                 "--save-scenario", saved)
    assert result.exit_code == 0, result.output
    text = saved.read_text()
    assert f"  max_num_seqs: null  # in effect: {SEQS_DEFAULT_BIG_GPU}\n" in text
    assert f"  max_num_batched_tokens: null  # in effect: {BATCHED_TOKENS[(True, SERVE)]}\n" \
        in text
