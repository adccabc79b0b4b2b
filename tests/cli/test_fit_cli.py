"""`servecap fit` through the real CLI: each answer checked against `servecap plan` itself."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from bad_input_checks import one_line_error
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]

H100 = ("--device", "h100-80gb")


def fit_json(run, *args):
    result = run("fit", *args, "--json")
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.stdout)


def plan_fits(run, *args) -> bool:
    result = run("plan", *args)
    assert result.exit_code in (0, 1), result.output
    return result.exit_code == 0


def test_most_4096_token_requests_of_the_seed_case_is_39_as_plan_says(run):
    code, data = fit_json(run, "teaching-7b", "--device", "40GiB", "--runtime-peak", "3GiB",
                          "--safety", "4GiB", "--context", "4096")
    assert code == 0 and data["question"] == "concurrency"
    assert data["max_concurrency_requests"] == 39
    plan = json.loads(run("plan", "teaching-7b", "--context", "4096", "--json").stdout)
    assert plan["memory_ceiling_requests"] == 39
    assert data["plan"]["free_bytes"] >= 0 > data["next_plan"]["free_bytes"]
    assert data["binding_line"] == "kv_cache"


def test_longest_context_for_16_requests_fits_and_one_more_token_does_not(run):
    code, data = fit_json(run, "teaching-7b", "--concurrency", "16")
    assert code == 0 and data["question"] == "context"
    tokens = data["max_context_tokens"]
    assert tokens % 16 == 0  # whole 16-token blocks: the ledger pages
    assert plan_fits(run, "teaching-7b", "--context", tokens, "--concurrency", 16)
    assert not plan_fits(run, "teaching-7b", "--context", tokens + 1, "--concurrency", 16)


def test_llama_70b_on_h100_needs_tensor_parallel(run):
    load = ("--context", "8192", "--concurrency", "16")
    code, data = fit_json(run, "llama-3.1-70b-instruct", *H100, *load, "--find", "tp")
    tp = data["min_tensor_parallel_size"]
    assert code == 0 and tp >= 2
    assert plan_fits(run, "llama-3.1-70b-instruct", *H100, *load, "-tp", tp)
    assert not plan_fits(run, "llama-3.1-70b-instruct", *H100, *load, "-tp", tp // 2)
    assert data["plan"]["tensor_parallel_size"] == tp


def test_no_tensor_parallel_size_fits_names_the_binding_line_and_exits_1(run):
    args = ("llama-3.1-70b-instruct", *H100, "--context", "32768", "--concurrency", "64")
    code, data = fit_json(run, *args, "--find", "tp", "--up-to", "8")
    assert code == 1 and data["min_tensor_parallel_size"] is None
    assert data["binding_line"] == "kv_cache" and data["binding_over_bytes"] > 0
    result = run("fit", *args, "--find", "tp", "--up-to", "8")
    assert result.exit_code == 1
    assert "nothing in the searched range fits" in result.stdout


def test_a_model_that_cannot_be_split_refuses_tp_above_1(run):
    """teaching-7b states no architecture: tp 1 is planned, the rest refused, exit 1."""
    code, data = fit_json(run, "teaching-7b", "--device", "20GiB", "--find", "tp",
                          "--up-to", "4")
    assert code == 1
    assert [t["fits"] for t in data["tried"]] == [False] * 4
    assert all(t["refused"] for t in data["tried"][1:])
    assert "states no architecture" in data["tried"][1]["refused"]
    assert data["tried"][0]["free_bytes"] < 0 and data["binding_over_bytes"] > 0


def test_fewest_gpus_with_pipeline_parallel_fits_as_plan_says(run):
    args = ("llama-3.1-70b-instruct", *H100, "--context", "32768", "--concurrency", "64")
    code, data = fit_json(run, *args, "--find", "gpus", "--up-to", "16")
    assert code == 0
    tp, pp = data["plan"]["tensor_parallel_size"], data["plan"]["pipeline_parallel_size"]
    assert data["min_num_devices"] == tp * pp
    assert plan_fits(run, *args, "-tp", tp, "-pp", pp)
    fewer = [t for t in data["tried"] if t.get("tensor_parallel_size") and not t["fits"]]
    assert all(t["tensor_parallel_size"] * t["pipeline_parallel_size"] <= tp * pp for t in fewer)


def test_kv_dtype_table_of_every_dtype_tried(run):
    args = ("llama-3.1-8b", "--device", "40GiB", "--context", "32768", "--concurrency", "5",
            "--runtime-peak", "2GiB")
    code, data = fit_json(run, *args, "--find", "kv-dtype")
    assert code == 0 and data["kv_dtype"] == "fp8"
    assert [t["candidate"] for t in data["tried"]] == ["bf16", "fp16", "fp8", "int8", "int4"]
    fp16 = data["tried"][1]
    assert not fp16["fits"] and fp16["free_bytes"] == data["tried"][0]["free_bytes"]
    assert plan_fits(run, *args, "--kv-dtype", "fp8")
    assert not plan_fits(run, *args, "--kv-dtype", "bf16")
    assert not plan_fits(run, *args, "--kv-dtype", "fp16")


def test_weight_dtype_answer_fits_and_the_more_precise_one_does_not(run):
    args = ("llama-3.1-8b", "--device", "24GiB", "--context", "8192", "--concurrency", "8")
    code, data = fit_json(run, *args, "--find", "weight-dtype")
    assert code == 0
    dtype = data["weight_dtype"]
    previous = data["tried"][[t["candidate"] for t in data["tried"]].index(dtype) - 1]
    assert plan_fits(run, *args, "--weight-dtype", dtype)
    assert not plan_fits(run, *args, "--weight-dtype", previous["candidate"])


@pytest.mark.parametrize("args", [
    ("teaching-7b", "--find", "everything"),
    ("teaching-7b", "--context", "4096", "--concurrency", "16"),
    ("teaching-7b", "--context", "4096", "--find", "context"),
    ("teaching-7b", "--concurrency", "16", "--up-to", "0"),
    ("llama-3.1-8b", "--device", "h100-80gb", "--find", "tp", "-tp", "2"),
    ("llama-3.1-8b", "--concurrency", "16"),  # no --device
    ("llama-3.1-8b", "--device", "h100-80gb", "--find", "gpus", "--engine", "vllm",
     "--safety", "4GiB"),
    ("llama-3.1-8b", "--device", "h100-80gb", "--find", "kv-dtype", "--kv-dtype", "fp8"),
])
def test_bad_input_is_one_line_and_exit_2(run, args):
    result = run("fit", *args)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("servecap: error: ")
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.output


def test_help_teaches_by_example(run):
    result = run("fit", "--help")
    assert result.exit_code == 0
    assert re.search(r"servecap fit teaching-7b --concurrency 16", result.stdout)
    for flag in ("--device", "--runtime-peak", "--kv-dtype", "--find", "--engine"):
        assert flag in result.stdout, flag


@pytest.mark.parametrize("args", [
    ("llama-3.1-8b", *H100, "--concurrency", "64", "--engine", "vllm"),
    ("llama-3.1-70b-instruct", *H100, "--context", "32768", "--concurrency", "64",
     "--find", "gpus", "--up-to", "16"),
])
def test_tables_fit_80_columns_without_wrapping_a_cell(run, args):
    """A wrapped cell adds a row: the rows drawn must be exactly one per candidate shown and
    one per ledger line (plus 'left')."""
    result = run("fit", *args)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    data = json.loads(run("fit", *args, "--json").stdout)
    planned = [t for t in data["tried"] if t.get("free_bytes") is not None]
    shown = 2 if data["question"] in ("context", "concurrency") else len(planned)
    rows = [line for line in lines if line.startswith("│")]
    assert len(rows) == shown + len(data["plan"]["lines"]) + 1
    assert "│ KV cache in use" in result.stdout and "binds" in result.stdout


# `run` holds no state between invocations (a fresh CliRunner result each call)
@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(device_gib=st.integers(18, 120), load=st.integers(1, 48),
       question=st.sampled_from(["context", "concurrency"]),
       model=st.sampled_from(["teaching-7b", "llama-3.1-8b"]))
def test_fits_answer_fits_per_plan_and_the_next_value_does_not(run, device_gib, load, question,
                                                              model):
    """Property, through both commands: plan says the answer fits and answer + 1 does not."""
    given_flag = "--concurrency" if question == "context" else "--context"
    common = (model, "--device", f"{device_gib}GiB", "--runtime-peak", "1GiB",
              given_flag, load * (1 if question == "context" else 512))
    code, data = fit_json(run, *common, "--up-to", 2**20 if question == "context" else 65_536)
    answer = data["max_context_tokens" if question == "context" else "max_concurrency_requests"]
    if answer is None:
        assert code == 1 and data["binding_line"]
        return
    flag = "--context" if question == "context" else "--concurrency"
    assert plan_fits(run, *common, flag, answer)
    assert not plan_fits(run, *common, flag, answer + 1)


def test_fits_json_path_never_loads_rich() -> None:
    """As plan's: rich is loaded only to draw the table."""
    probe = ("import json, sys\n"
             "from servecap.cli import fit_cmd\n"
             "from servecap.cli.deploy import NO_DEPLOY\n"
             "from servecap.cli.inputs import PlanFlags\n"
             "loaded = fit_cmd.plan_cmd._load('teaching-7b')\n"
             "result = fit_cmd._search('concurrency', 'teaching-7b', PlanFlags(), NO_DEPLOY,"
             " loaded, None)\n"
             "assert json.dumps(fit_cmd.fit_to_dict(result))\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] == 'rich'))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_the_examples_in_docs_print_what_the_docs_say(run):
    """docs/fit.md shows each `$ servecap fit ...` with its first line of output (the whole
    block is the program's: tests/test_docs_current.py)."""
    doc = (Path(__file__).parents[2] / "docs" / "fit.md").read_text()
    examples = re.findall(r"^\$ servecap (fit .+)\n(.+)$", doc, re.M)
    assert len(examples) == 6
    for command, first_line in examples:
        result = run(*command.split())
        assert result.exit_code in (0, 1), result.output
        assert result.stdout.splitlines()[0] == first_line, command


def test_an_answer_at_the_end_of_the_range_says_so(run):
    """One Llama-3.1-8B request fits its whole 131,072-token window on an H100: nothing binds
    inside the range, and the output says where the range ended."""
    code, data = fit_json(run, "llama-3.1-8b", *H100, "--concurrency", "1")
    assert code == 0 and data["max_context_tokens"] == 131_072
    assert data["range_end"] == "the model's max_position_embeddings"
    assert data["binding_line"] is None and data["next_plan"] is None
    out = run("fit", "llama-3.1-8b", *H100, "--concurrency", "1").stdout
    assert "for 1 request: 131,072 tokens" in out and "end of the range searched" in out
    code, data = fit_json(run, "llama-3.1-8b", *H100, "--concurrency", "1", "--up-to", "1000")
    assert data["max_context_tokens"] == 1000 and data["range_end"] == "--up-to"


@pytest.mark.parametrize(("flag", "path", "find"), [("--workload", "workloads/chat.yaml", ()),
                                                    ("--trace", "workloads/trace.csv",
                                                     ("--find", "tp"))])
def test_fit_refuses_a_workload_its_question_does_not_read(run, flag, path, find) -> None:
    """--workload and --trace were taken and ignored by every question but kv-offload, where
    --hit-rate beside them is refused."""
    result = run("fit", "llama-3.1-8b", "--device", "h100-80gb", flag, ROOT / path, *find)
    one_line_error(result, f"{flag} = '{ROOT / path}': applies with --find kv-offload")


def test_fit_kv_offload_without_a_workload_names_only_its_own_flags(run) -> None:
    """The missing-workload error offered --input-len/--output-len, which fit does not take."""
    result = run("fit", "llama-3.1-8b", "--device", "h100-80gb", "--engine", "vllm", "--find",
                 "kv-offload", "--hit-rate", "0.9")
    one_line_error(result, "--workload/--trace is missing: give exactly one")
    assert "--input-len" not in result.stderr
