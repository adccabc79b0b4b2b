"""`servecap fit` answers the inverse questions, and `plan` agrees with every answer: the
answer fits, one step further does not."""

import json

import pytest

L4 = ("llama-3.1-8b", "--device", "l4-24gb")


def _fit(run, *args) -> list[dict]:
    result = run("fit", *args, "--json")
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)["answers"]


def _plan_exit(run, *args) -> int:
    return run("plan", *args, "--json").exit_code


def test_the_longest_context_for_n_requests_is_the_edge_of_fitting(run) -> None:
    (answer,) = _fit(run, *L4, "--concurrency", "16")
    tokens = answer["answer"]
    assert answer["plan"]["context_tokens"] == tokens and answer["plan"]["fits"]
    assert _plan_exit(run, *L4, "--concurrency", "16", "--context", tokens) == 0
    assert _plan_exit(run, *L4, "--concurrency", "16", "--context", tokens + 1) == 1


def test_the_most_requests_at_a_context_is_the_plan_ceiling(run) -> None:
    (answer,) = _fit(run, *L4, "--context", "8192")
    plan = json.loads(run("plan", *L4, "--context", "8192", "--concurrency", "1",
                          "--json").stdout)
    assert answer["answer"] == plan["memory_ceiling_requests"] > 0


def test_a_load_that_fits_says_so(run) -> None:
    (answer,) = _fit(run, *L4, "--context", "4096", "--concurrency", "2")
    assert answer["answer"] == "yes"


@pytest.fixture(scope="module")
def over(request):
    from typer.testing import CliRunner

    from servecap.cli.app import app

    result = CliRunner().invoke(app, ["fit", *L4, "--context", "8192", "--concurrency", "6",
                                      "--json"])
    return {a["question"].split(" that ")[0]: a for a in json.loads(result.stdout)["answers"]}


def test_the_smallest_tp_fits_and_the_next_smaller_does_not(run, over) -> None:
    tp = over["smallest tensor parallel size"]["answer"]
    load = (*L4, "--context", "8192", "--concurrency", "6")
    assert _plan_exit(run, *load, "-tp", tp) == 0
    assert _plan_exit(run, *load, "-tp", tp // 2) == 1


@pytest.mark.parametrize(("key", "flag", "wider"), [("widest kv-dtype", "--kv-dtype", "bf16"),
                                                     ("widest weight-dtype", "--weight-dtype",
                                                      "bf16")])
def test_the_widest_dtype_fits_and_the_wider_does_not(run, over, key, flag, wider) -> None:
    name = over[key]["answer"]
    load = (*L4, "--context", "8192", "--concurrency", "6")
    assert _plan_exit(run, *load, flag, name) == 0
    assert _plan_exit(run, *load, flag, wider) == 1


def test_a_question_is_required(run) -> None:
    result = run("fit", *L4)
    assert result.exit_code == 2 and "--concurrency N asks for the longest" in result.stderr


def test_nothing_fits_is_exit_1_with_none(run) -> None:
    result = run("fit", "llama-3.1-70b-instruct", "--device", "l4-24gb", "--context", "8192",
                 "--concurrency", "64", "--max-tensor-parallel-size", "2", "--json")
    assert result.exit_code == 1
    assert all(a["answer"] is None for a in json.loads(result.stdout)["answers"])
