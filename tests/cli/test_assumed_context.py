"""A plan without --context is planned at the model's max_position_embeddings (as vLLM's
--max-model-len defaults); the output said so nowhere, so llama-3.1-8b 'did not fit' 24 GiB
at 131,072 tokens with nothing to show that length was assumed."""

import json

ASSUMED = ("--context (max_model_len) not given: 131,072 tokens assumed, the model's "
           "max_position_embeddings, as vLLM defaults --max-model-len")


def test_plan_says_the_context_it_assumed(run) -> None:
    result = run("plan", "llama-3.1-8b", "--device", "24GiB", "--json")
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert report["context_tokens"] == 131072
    assert ASSUMED in report["notes"]


def test_a_context_given_is_not_called_assumed(run) -> None:
    for args in (("--context", "8192"), ("--lengths", "100,200")):
        result = run("plan", "llama-3.1-8b", "--device", "24GiB", *args, "--json")
        assert result.exit_code == 0, result.output
        assert not [n for n in json.loads(result.stdout)["notes"] if "not given" in n]


def test_simulate_says_it_too(run) -> None:
    """simulate's max_model_len (the runtime peak's context, the longest request admitted)
    defaults the same way."""
    result = run("simulate", "llama-3.1-8b", "--device", "h100-80gb", "--input-len", "100",
                 "--output-len", "10", "--num-requests", "50", "--json")
    assert result.exit_code == 0, result.output
    assert ASSUMED in json.loads(result.stdout)["plan_notes"]
