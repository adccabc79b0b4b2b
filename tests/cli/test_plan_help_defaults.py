"""plan --help states the defaults the plan uses: --block-size said '(vLLM default 16)' while
--engine sglang plans 1-token pages and trtllm 32-token blocks, and --kv-dtype and
--activation-dtype said nothing of what they default to."""

import json

import pytest


def _help(run) -> str:
    result = run("plan", "--help")
    assert result.exit_code == 0
    return " ".join(result.stdout.replace("│", " ").split())


@pytest.mark.parametrize(("engine", "blocks"), [("plain", 16), ("vllm", 16), ("sglang", 1),
                                                ("trtllm", 32)])
def test_the_block_size_help_gives_is_the_one_planned(run, engine, blocks) -> None:
    said = {"plain": "Default 16 (vLLM's)", "vllm": "Default 16 (vLLM's)",
            "sglang": "--engine sglang 1,", "trtllm": "trtllm 32."}[engine]
    assert said in _help(run)
    result = run("plan", "llama-3.1-8b", "--device", "h100-80gb", "--context", "8192",
                 "--engine", engine, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["block_size_tokens"] == blocks


def test_the_dtype_options_say_their_default(run) -> None:
    text = _help(run)
    assert "int8, int4. Default: the model dtype (vLLM's auto)." in text
    assert "bf16, fp16, fp8, int8. Default: the model dtype." in text


def test_workbook_help_names_its_load_defaults(run) -> None:
    """workbook --context and --concurrency named no default: the Ledger is planned at the
    model's max_position_embeddings and one request, as plan's are."""
    result = run("workbook", "--help")
    assert result.exit_code == 0
    text = " ".join(result.stdout.replace("│", " ").split())
    assert "The first is the Ledger's. Default: the model's max_position_embeddings" in text
    assert "Resident requests. Default 1." in text


def test_max_num_seqs_help_names_the_plain_default_the_estimate_uses(run) -> None:
    """--max-num-seqs was described for vLLM alone, though the plain ledger's runtime-peak
    estimate reads it ('the widest step of 8,192 batched tokens or 256 decodes')."""
    assert "decode rows, default 256; vLLM:" in _help(run)
    result = run("plan", "llama-3.1-8b", "--device", "24GiB", "--context", "8192", "--json")
    peak = next(line for line in json.loads(result.stdout)["lines"]
                if line["key"] == "runtime_peak")
    assert "or 256 decodes" in peak["from"]


def test_max_num_seqs_help_states_the_rule_the_profile_uses(run) -> None:
    """The vLLM default was typed into the help ('256, or 1024 on >= 70 GiB GPUs') apart from
    batch_defaults' rule, and left out that an A100 80GB keeps the smaller batch."""
    from servecap.ledger.units import GiB
    from servecap.ledger.vllm_batch import (
        BIG_GPU,
        BIG_GPU_EXCEPT,
        SEQS_DEFAULT,
        SEQS_DEFAULT_BIG_GPU,
    )

    assert (f"default the release's ({SEQS_DEFAULT:,}, or {SEQS_DEFAULT_BIG_GPU:,} on a >= "
            f"{BIG_GPU // GiB} GiB GPU other than an {BIG_GPU_EXCEPT})") in _help(run)


@pytest.mark.parametrize("command", ["simulate", "sweep"])
def test_simulate_batch_help_states_the_rule_the_release_uses(run, command) -> None:
    """simulate's --max-num-batched-tokens and --max-num-seqs typed vLLM's rule a second time
    ('8192 on a >= 70 GiB GPU that is not an A100, else 2048') and missed the 16,384 tokens
    a >= 160 GiB GPU takes from v0.28.0, the default the newest release simulates on a B200."""
    from servecap.ledger.scheduler_defaults import (
        DEFAULT_MAX_NUM_BATCHED_TOKENS,
        DEFAULT_MAX_NUM_SEQS,
    )
    from servecap.ledger.units import GiB
    from servecap.ledger.vllm_batch import (
        BATCHED_TOKENS,
        HUGE_GPU,
        HUGE_GPU_TOKENS,
        SEQS_DEFAULT,
        SEQS_DEFAULT_BIG_GPU,
        SERVE,
    )

    result = run(command, "--help")
    assert result.exit_code == 0
    text = " ".join(result.stdout.replace("│", " ").split())
    assert (f"(V1 server: {BATCHED_TOKENS[(True, SERVE)]:,} on a >= 70 GiB GPU other than an "
            f"A100 ({HUGE_GPU_TOKENS:,} on a >= {HUGE_GPU // GiB} GiB GPU from v0.28.0), else "
            f"{BATCHED_TOKENS[(False, SERVE)]:,}), {DEFAULT_MAX_NUM_BATCHED_TOKENS:,} with "
            "--engine plain.") in text
    assert (f"(V1: {SEQS_DEFAULT:,}, or {SEQS_DEFAULT_BIG_GPU:,} on a >= 70 GiB GPU other than "
            f"an A100), {DEFAULT_MAX_NUM_SEQS:,} with --engine plain.") in text


def test_simulate_help_names_the_defaults_it_takes(run) -> None:
    """simulate's --safety, --kv-dtype, --num-gpu-blocks and --speculate-max-batch named no
    default: 10% of the device (a model file's serving.safety where it gives one), the model
    dtype, the ledger's whole pool, and speculation at every batch size."""
    from servecap.ledger.serve import DEFAULT_SAFETY_FRACTION

    result = run("simulate", "--help")
    text = " ".join(result.stdout.replace("│", " ").split())
    assert (f"Default {DEFAULT_SAFETY_FRACTION:.0%}, or the model file's serving.safety."
            in text)
    assert "--kv-cache-dtype). Default: the model dtype (vLLM's auto)." in text
    assert "num_gpu_blocks_override). Default: every block the ledger leaves." in text
    assert "Default: speculate at every batch size." in text
    report = json.loads(run("simulate", "teaching-7b", "--device", "h100-80gb", "--input-len",
                            "10", "--output-len", "2", "--num-requests", "2", "--json").stdout)
    assert report["memory"]["safety_bytes"] == 4 * 2**30  # teaching-7b's serving.safety


@pytest.mark.parametrize("command", ["plan", "fit", "diff", "workbook", "simulate", "sweep",
                                     "cost", "speculate", "prefix"])
def test_device_help_says_when_it_is_required(run, command) -> None:
    """--device said what it takes but not that leaving it out is an error ('--device is
    missing: required') unless a scenario or the model file's serving block gives one."""
    from servecap.cli.scenario_opts import DEVICE_REQUIRED, DEVICE_REQUIRED_BY_MODEL

    result = run(command, "--help")
    said = DEVICE_REQUIRED_BY_MODEL if command == "prefix" else DEVICE_REQUIRED  # no --scenario
    assert said in " ".join(result.stdout.replace("│", " ").split())
    assert run("plan", "teaching-7b").exit_code == 0  # serving.device: 40GiB
    assert "--device is missing: required" in run("plan", "llama-3.1-8b").stderr


def test_verify_help_names_the_defaults_it_takes(run) -> None:
    """verify's --context, --concurrency, --runtime-peak, --safety, --weight-dtype, --kv-dtype
    and --block-size named no default; they are plan's, after the model file's serving
    block."""
    from typer.testing import CliRunner

    from servecap.cli.app import app
    from servecap.ledger.serve import DEFAULT_BLOCK_SIZE_TOKENS, DEFAULT_SAFETY_FRACTION

    wide = CliRunner().invoke(app, ["verify", "--help"], env={"COLUMNS": "200"})
    text = " ".join(wide.stdout.replace("│", " ").split())
    for said in ("Default: the model file's serving.context, else its max_position_embeddings.",
                 "Default: the model file's serving.concurrency, else 1.",
                 "Default: the model file's, else the ledger's estimate.",
                 f"Default: the model file's, else {DEFAULT_SAFETY_FRACTION:.0%}.",
                 "fp32, bf16, fp16. Default: the checkpoint's.",
                 f"Default: the model file's, else {DEFAULT_BLOCK_SIZE_TOKENS}."):
        assert said in text, said
