"""Bad `servecap load` / `servecap serve` input: one line naming the flag, exit 2, no run."""

import pytest
from typer.testing import CliRunner

from servecap.cli.app import app

pytest.importorskip("aiohttp")


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.fixture
def trace(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens\n0,8,4\n")
    return path


@pytest.mark.parametrize("args, flag", [
    (("--rate", "5"), "--rate"),
    (("--concurrency", "0"), "--concurrency"),
    (("--duration", "120"), "--duration"),
    (("--timeout", "soon"), "--timeout"),
    (("--compare-simulate",), "--plan-device"),
    (("--records", "/no/such/folder/r.csv"), "--records"),
    (("--compare-simulate", "--plan-device", "80GiB"), "--plan-device = '80GiB'"),
    (("--workload", "workloads/chat.yaml"), "--workload/--trace = 'both'"),
    (("--metrics", "localhost:8000/metrics"), "--metrics"),
])
def test_bad_flag_is_one_line_and_exit_2(trace, args, flag):
    result = run("load", "http://127.0.0.1:9/v1", "--model", "m", "--trace", trace, *args)
    assert result.exit_code == 2, result.output
    assert flag in result.stderr and "Traceback" not in result.output


def test_missing_trace_names_the_file(tmp_path):
    result = run("load", "http://127.0.0.1:9/v1", "--model", "m", "--trace",
                 tmp_path / "none.csv")
    assert result.exit_code == 2 and "none.csv" in result.stderr


def test_unreachable_server_counts_every_request_and_exits_1(trace, tmp_path):
    records = tmp_path / "r.csv"
    result = run("load", "http://127.0.0.1:9/v1", "--model", "m", "--trace", trace, "--json",
                 "--records", records)
    assert result.exit_code == 1
    assert '"connection_error": 1' in result.stdout and "rejected" in records.read_text()


@pytest.mark.parametrize("args, flag", [(("--admission", "eager"), "--admission"),
                                        (("--port", "0"), "--port"),
                                        # these four once started (or died in a traceback)
                                        (("--device", "tpu"), "--device"),
                                        (("--device", "cuda:99"), "--device"),
                                        (("--max-model-len", "100000"), "--max-model-len"),
                                        (("--tokenizer", "/no/such/tok"), "--tokenizer")])
def test_serve_bad_flag_is_exit_2(args, flag):
    # an address not this machine's: a check that let the run through fails, never serves
    result = run("serve", "tiny-llama", "--host", "203.0.113.1", *args)
    assert result.exit_code == 2 and flag in result.stderr, result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("url", ["notaurl", "localhost:8000/v1", "ftp://host/v1", "http://"])
def test_a_base_url_that_is_not_http_is_one_line_and_exit_2(trace, url):
    result = run("load", url, "--model", "m", "--trace", trace)
    assert result.exit_code == 2, result.output
    assert "base_url" in result.stderr and "Traceback" not in result.output


def test_an_existing_records_file_needs_force_and_an_input_is_never_an_output(trace, tmp_path):
    """As simulate and verify: load once replaced an existing --records file, even the trace
    it was replaying."""
    kept = tmp_path / "kept.csv"
    kept.write_text("mine\n")
    result = run("load", "http://127.0.0.1:9/v1", "--model", "m", "--trace", trace,
                 "--records", kept)
    assert result.exit_code == 2 and "--force" in result.stderr
    assert kept.read_text() == "mine\n"
    result = run("load", "http://127.0.0.1:9/v1", "--model", "m", "--trace", trace,
                 "--token-times", trace, "--force")
    assert result.exit_code == 2 and "is an input of this run" in result.stderr
    assert trace.read_text().startswith("arrival_s")


def test_without_model_an_unreachable_server_is_one_line_naming_model(trace):
    result = run("load", "http://127.0.0.1:9/v1", "--trace", trace)
    assert result.exit_code == 2 and "--model" in result.stderr, result.output
    assert "127.0.0.1:9/v1/models" in result.stderr and "Traceback" not in result.output


@pytest.mark.parametrize("line, where", [
    ("not json", "line 1"),
    ('{"text": "hi"}', "line 1"),
    ('{"prompt": 5}', "prompt = 5"),
    ('{"prompt": "hi", "output_tokens": 0}', "output_tokens = 0"),
    ('{"messages": [{"role": "tool", "content": "x"}]}', "role = 'tool'"),
    ('{"messages": [{"role": "assistant", "content": "x"}]}', "user (human) message"),
    ('{"conversations": [{"from": "human"}]}', "value is missing"),
    ('{"prompt": "no length"}', "--output-tokens"),
])
def test_a_bad_dataset_line_is_one_line_naming_file_and_line(tmp_path, line, where):
    data = tmp_path / "d.jsonl"
    data.write_text(line + "\n")
    result = run("load", "http://127.0.0.1:9/v1", "--model", "m", "--dataset", data,
                 "--rate", "1")
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and where in lines[0] and "d.jsonl" in lines[0], lines
    assert "Traceback" not in result.output


@pytest.mark.parametrize("args, flag", [
    (("--endpoint", "embeddings"), "--endpoint"),
    (("--endpoint", "chat"), "--tokenizer is missing"),
    (("--tokenizer", "/no/such/tok"), "--tokenizer = '/no/such/tok'"),
    (("--turns", "0"), "--turns"),
    (("--shared-prefix", "-1"), "--shared-prefix"),
    (("--think-time", "5"), "--think-time"),
])
def test_bad_prompt_flags_are_one_line_and_exit_2(trace, args, flag):
    result = run("load", "http://127.0.0.1:9/v1", "--model", "m", "--trace", trace, *args)
    assert result.exit_code == 2, result.output
    assert flag in result.stderr and "Traceback" not in result.output


def test_a_dataset_needs_its_arrivals_and_replaces_a_trace(trace, tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text('{"prompt": "hi", "output_tokens": 3}\n')
    result = run("load", "http://127.0.0.1:9/v1", "--model", "m", "--dataset", data)
    assert result.exit_code == 2 and "--rate/--concurrency" in result.stderr, result.output
    result = run("load", "http://127.0.0.1:9/v1", "--model", "m", "--dataset", data,
                 "--trace", trace, "--rate", "1")
    assert result.exit_code == 2 and "--dataset" in result.stderr, result.output
    result = run("load", "http://127.0.0.1:9/v1", "--model", "m", "--dataset",
                 tmp_path / "none.jsonl", "--rate", "1")
    assert result.exit_code == 2 and "none.jsonl" in result.stderr, result.output


@pytest.mark.parametrize("args, flag", [
    (("--sweep",), "--slo-ttft/--slo-tpot"),
    (("--sweep", "--slo-ttft", "50ms", "--sweep-tolerance", "2"), "--sweep-tolerance"),
    (("--slo-ttft", "50ms", "--target", "0"), "--target"),
    (("--slo-tpot", "fast"), "--slo-itl"),
    (("--sweep", "--slo-ttft", "50ms", "--xlsx", "/no/such/folder/s.xlsx"), "--xlsx"),
])
def test_bad_sweep_flags_are_one_line_and_exit_2(args, flag):
    result = run("load", "http://127.0.0.1:9/v1", "--model", "m", "--workload",
                 "workloads/chat.yaml", *args)
    assert result.exit_code == 2, result.output
    assert flag in result.stderr and "Traceback" not in result.output


def test_a_sweep_needs_a_workload(trace):
    result = run("load", "http://127.0.0.1:9/v1", "--model", "m", "--trace", trace, "--sweep",
                 "--slo-ttft", "50ms")
    assert result.exit_code == 2 and "--workload" in result.stderr, result.output


def test_a_shared_prefix_over_a_workloads_own_prefix_groups_is_refused():
    result = run("load", "http://127.0.0.1:9/v1", "--model", "m", "--workload",
                 "workloads/chat.yaml", "--shared-prefix", "64")
    assert result.exit_code == 2 and "--shared-prefix = 64" in result.stderr, result.output
    assert "system-prompt" in result.stderr
