"""A value typer cannot convert is said once, in plain words, with what was typed: pydantic's
'Input should be a valid integer, unable to parse string as an integer' said the same thing
twice; '--context 2M' suggested 2,097,152 or 4,096,000 (a binary mega times a decimal kilo);
blocks 17,33,65 (plan's --lengths spelling) did not show the value or how to give it."""

import pytest


def _line(run, *args) -> str:
    result = run(*args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("servecap: error:"), result.stderr
    return lines[0]


@pytest.mark.parametrize(("value", "binary", "decimal"), [
    ("4k", 4096, 4000), ("2M", 2097152, 2000000), ("1.5k", 1536, 1500)])
def test_a_suffixed_count_gets_its_binary_and_decimal_reading(run, value, binary,
                                                              decimal) -> None:
    line = _line(run, "plan", "teaching-7b", "--context", value)
    assert f"did you mean {binary} or {decimal}?" in line


@pytest.mark.parametrize(("args", "words"), [
    (("plan", "teaching-7b", "--concurrency", "x"),
     "'--concurrency': not a whole number (got 'x')"),
    (("plan", "teaching-7b", "--gpu-memory-utilization", "x"),
     "'--gpu-memory-utilization': not a number (got 'x')")])
def test_an_unconverted_value_is_said_once(run, args, words) -> None:
    line = _line(run, *args)
    assert words in line and "Input should be" not in line and "unable to parse" not in line


def test_blocks_lengths_typed_with_commas_are_shown_apart(run) -> None:
    line = _line(run, "blocks", "17,33,65")
    assert "(got '17,33,65'; give them apart: 17 33 65)" in line


@pytest.mark.parametrize(("args", "words"), [
    (("plan", "teaching-7b", "--device", "24GiB", "--dtype", "float16"),
     "No such option: --dtype: it is vLLM's; give it in the launch line after --, e.g. "
     "servecap plan --device h100-80gb -- vllm serve MODEL --dtype ..."),
    (("diff", "teaching-7b", "--quantization", "awq"),
     "No such option: --quantization: it is vLLM's; give it in the launch line after --"),
    (("plan", "teaching-7b", "--device", "24GiB", "--swap-space", "4"),
     "No such option: --swap-space: vLLM's, and it changes no GPU memory; leave it out")])
def test_a_vllm_flag_plan_has_no_option_for_says_where_it_goes(run, args, words) -> None:
    """'plan --dtype float16' read 'No such option: --dtype (Possible options: --kv-dtype,
    --lora-dtype, --tp)', though plan reads vLLM's --dtype from a pasted launch line."""
    line = _line(run, *args)
    assert words in line and "Possible options" not in line


def test_an_unknown_flag_keeps_clicks_words(run) -> None:
    assert "No such option: --bogus" in _line(run, "plan", "teaching-7b", "--bogus")


def test_a_comma_list_on_a_repeating_option_says_repeat_it(run) -> None:
    """blocks --block-size 16,32 read 'not a whole number (got '16,32')': the option repeats."""
    line = _line(run, "blocks", "17", "33", "--block-size", "16,32")
    assert "(got '16,32'; repeat the flag: --block-size 16 --block-size 32)" in line


@pytest.mark.parametrize(("args", "said"), [
    (("plan", "llama-3.1-8b", "--concurrency", "n"), "not a whole number (got 'n')"),
    (("plan", "llama-3.1-8b", "--context", "e"), "not a whole number (got 'e')"),
    (("simulate", "llama-3.1-8b", "--rate", "a"), "not a number (got 'a')")])
def test_a_value_spelt_inside_the_flag_name_is_still_shown(run, args, said) -> None:
    """'--concurrency n' read 'not a whole number' alone: the value was looked for anywhere
    in the message, and the n of --concurrency was taken for it."""
    result = run(*args)
    assert result.exit_code == 2 and said in result.stderr


@pytest.mark.parametrize(("typed", "said"), [
    ("plann", "No such command 'plann' (did you mean plan?)"),
    ("simulat", "No such command 'simulat' (did you mean simulate or speculate?)"),
    ("envelope", "No such command 'envelope'; the commands: plan, fit, models")])
def test_a_mistyped_command_is_given_the_near_ones(run, typed, said) -> None:
    """'servecap plann' read 'No such command' alone, where a mistyped option is offered
    the options near it."""
    result = run(typed)
    assert result.exit_code == 2 and said in result.stderr
