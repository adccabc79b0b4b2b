"""servecap prefix on traces the tests write: the JSON contract, the table at 80 columns,
text prompts through a real tokenizer, and one-line errors naming file, line and field."""

import json
import random
from pathlib import Path

import pytest

MODEL = ("--model", "llama-3.1-8b", "--device", "h100-80gb")
KEYS = {"hit_rate", "hit_rate_unbounded", "reusable_tokens", "cached_tokens", "prompt_tokens",
        "blocks_shared", "short_prefix_warnings", "groups", "pool_tokens_saved",
        "pool_bytes_saved", "block_size", "pool_blocks", "ttft"}


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _chat_trace(path, n=24, shared=600):
    rng = random.Random(3)
    system = [rng.randrange(1000, 30000) for _ in range(shared)]
    rows = [{"prompt_token_ids": system + [rng.randrange(1000, 30000)
                                           for _ in range(rng.randint(20, 300))],
             "arrival_s": 0.5 * i, "output_tokens": 32} for i in range(n)]
    return _write(path, rows)


def _json(run, *args):
    result = run("prefix", *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_a_shared_system_prompt_is_reused_in_full_blocks(run, tmp_path):
    trace = _chat_trace(tmp_path / "chat.jsonl")
    report = _json(run, trace, *MODEL)
    assert KEYS <= set(report)
    # 600 tokens shared: 37 full blocks of 16 (592 tokens), found by the 23 later requests
    assert report["reusable_tokens"] == 23 * 592 == report["cached_tokens"]
    assert report["groups"][0]["prefix_tokens"] == 592 and report["groups"][0]["requests"] == 24
    assert report["blocks_shared"] == 23 * 37
    assert report["pool_bytes_saved"] == report["pool_tokens_saved"] * 131072  # 8B bf16 KV
    on, off = report["ttft"]["with_prefix_caching"], report["ttft"]["without_prefix_caching"]
    assert on["prefill_tokens"] < off["prefill_tokens"] == report["prompt_tokens"]
    assert on["ttft_ms"]["p50"] < off["ttft_ms"]["p50"]


def test_block_size_moves_the_reuse_and_a_small_pool_lowers_it(run, tmp_path):
    trace = _chat_trace(tmp_path / "chat.jsonl")
    at_256 = _json(run, trace, *MODEL, "--block-size", "256", "--no-simulate")
    assert at_256["reusable_tokens"] == 23 * 512
    small = _json(run, trace, *MODEL, "--num-gpu-blocks", "60", "--no-simulate")
    assert small["pool_blocks"] == 59  # vLLM's null block is never pooled
    assert small["hit_rate"] <= small["hit_rate_unbounded"]


def test_the_user_who_got_zero_is_told_why(run, tmp_path):
    rows = [{"prompt_token_ids": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10] + [100 + i] * 40}
            for i in range(6)]
    trace = _write(tmp_path / "short.jsonl", rows)
    report = _json(run, trace, *MODEL)
    assert report["hit_rate"] == 0 and report["ttft"]["simulated"] is False
    [warning] = report["short_prefix_warnings"]
    assert warning["prefix_tokens"] == 10 and warning["requests"] == 6


def test_the_table_fits_80_columns_and_says_the_warning(tmp_path):
    from typer.testing import CliRunner

    from servecap.cli.app import app

    rows = [{"prompt_token_ids": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10] + [100 + i] * 40,
             "arrival_s": i, "output_tokens": 8} for i in range(6)]
    trace = _write(tmp_path / "short.jsonl", rows)
    out = CliRunner().invoke(app, ["prefix", str(trace), *MODEL], env={"COLUMNS": "80"})
    assert out.exit_code == 0, out.output
    assert max(len(line) for line in out.stdout.splitlines()) <= 80
    assert "hit rate, plan's pool (LRU)" in out.stdout and "0.0 %" in out.stdout
    assert "shorter than one 16-token block" in " ".join(out.stdout.split())


@pytest.mark.parametrize("line, field", [
    ('{"prompt_token_ids": [1, "x"]}', "line 2, prompt_token_ids"),
    ('{"prompt_token_ids": [1, 2], "arrival_s": -1}', "line 2, arrival_s"),
    ('{"prompt_token_ids": [1, 2], "output_tokens": 0}', "line 2, output_tokens"),
    ('{"tokens": [1, 2]}', "line 2, prompt_token_ids is missing"),
    ('{"prompt_token_ids": [1, 2]', "line 2 = "),
    ('{"prompt": "hello there"}', "line 2, prompt"),
])
def test_a_bad_line_is_one_error_naming_file_line_and_field(run, tmp_path, line, field):
    trace = tmp_path / "bad.jsonl"
    trace.write_text('{"prompt_token_ids": [1, 2, 3]}\n' + line + "\n")
    result = run("prefix", trace, *MODEL, "--json")
    assert result.exit_code == 2 and result.stdout == ""
    [message] = result.stderr.strip().splitlines()
    assert str(trace) in message and field in message, message


def test_text_without_a_tokenizer_says_how_to_get_one(run, tmp_path):
    trace = _write(tmp_path / "text.jsonl", [{"prompt": "You are a helpful assistant."}])
    result = run("prefix", trace, *MODEL)
    assert result.exit_code == 2
    assert "--tokenizer" in result.stderr and "prompt_token_ids" in result.stderr


WORDS = [f"w{i}" for i in range(200)]


def _word_tokenizer(folder):
    """A real tokenizer.json: one id per word, built and saved by the tokenizers package."""
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    tok = tokenizers.Tokenizer(WordLevel({w: i for i, w in enumerate(WORDS)} | {"[UNK]": 200},
                                         unk_token="[UNK]"))
    tok.pre_tokenizer = Whitespace()
    folder.mkdir(exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    return folder


def _text_trace(path):
    system = " ".join(WORDS[:40])  # 40 tokens: 2 full blocks of 16
    return _write(path, [{"prompt": f"{system} {WORDS[100 + i]} {WORDS[150 + i]}"}
                         for i in range(4)])


def test_text_prompts_through_a_real_tokenizer(run, tmp_path):
    folder = _word_tokenizer(tmp_path / "tok")
    report = _json(run, _text_trace(tmp_path / "text.jsonl"), *MODEL, "--tokenizer", folder)
    assert report["reusable_tokens"] == 3 * 32 and report["prompt_tokens_all"] == 4 * 42
    assert report["tokenizer"] == str(folder)


def test_text_prompts_default_to_the_model_directorys_tokenizer(run, tmp_path):
    import shutil

    model = _word_tokenizer(tmp_path / "model")
    shutil.copy(Path(__file__).parents[1] / "fixtures" / "configs" /
                "meta-llama--Llama-3.1-8B-Instruct" / "config.json", model / "config.json")
    trace = _text_trace(tmp_path / "text.jsonl")
    report = _json(run, trace, "--model", model, "--device", "h100-80gb", "--weight-dtype",
                   "bf16")
    assert report["tokenizer"] == str(model) and report["reusable_tokens"] == 3 * 32
    shown = run("prefix", trace, "--model", model, "--device", "h100-80gb", "--weight-dtype",
                "bf16", "--no-simulate")
    assert f"tokenized with {model}" in " ".join(shown.stdout.split())


def test_simulate_replays_a_token_trace_with_its_prefixes_cached(run):
    trace = Path(__file__).parents[2] / "workloads" / "prefix.jsonl"
    args = ("simulate", "llama-3.1-8b", "--device", "l4", "--trace", trace, "--json")
    on, off = (json.loads(run(*args, *extra).stdout)["policies"][0]
               for extra in ((), ("--no-prefix-caching",)))
    assert on["prefix_hit_tokens"] > 0 == off["prefix_hit_tokens"]
    assert on["ttft_ms"]["p50"] < off["ttft_ms"]["p50"]
    report = _json(run, trace, "--model", "llama-3.1-8b", "--device", "l4")
    assert report["ttft"]["with_prefix_caching"]["ttft_ms"]["p50"] == on["ttft_ms"]["p50"]


def test_simulate_names_the_line_a_token_trace_lacks_arrivals_on(run, tmp_path):
    trace = _write(tmp_path / "t.jsonl", [{"prompt_token_ids": [1, 2], "arrival_s": 0,
                                            "output_tokens": 3}, {"prompt_token_ids": [1]}])
    result = run("simulate", "llama-3.1-8b", "--device", "l4", "--trace", trace)
    assert result.exit_code == 2
    assert f"{trace}: line 2, arrival_s is missing" in result.stderr


def test_a_hybrid_is_cached_in_the_attention_block_vllm_raises_it_to(run, tmp_path):
    """qwen3.6-35b-a3b's gated-DeltaNet state raises vLLM's attention block (the plan's
    budget: 1,088 tokens on one H100), so a 1,500-token system prompt reuses one block."""
    rng = random.Random(5)
    system = [rng.randrange(1000, 30000) for _ in range(1500)]
    rows = [{"prompt_token_ids": system + [rng.randrange(1000, 30000) for _ in range(100)]}
            for _ in range(4)]
    trace = _write(tmp_path / "hybrid.jsonl", rows)
    report = _json(run, trace, "--model", "qwen3.6-35b-a3b", "--device", "h100-80gb",
                   "--max-model-len", "8192")
    assert report["block_size_asked"] == 16 and report["block_size"] == 1088
    assert report["reusable_tokens"] == 3 * 1088
    assert any("raises this hybrid's attention block to 1,088" in n for n in report["notes"])


def test_a_large_trace_read_at_a_terminal_shows_a_bar_over_its_bytes(tmp_path):
    import io

    from rich.console import Console

    from servecap.cli.prefix_view import BAR_FROM_BYTES, reading_bar
    from servecap.scenario.prefix_trace import read_trace

    row = json.dumps({"prompt_token_ids": list(range(1000, 1400))}) + "\n"
    path = tmp_path / "large.jsonl"
    path.write_text(row * (BAR_FROM_BYTES // len(row) + 1))
    screen = io.StringIO()
    terminal = Console(file=screen, force_terminal=True, width=80)
    with reading_bar(path, console=terminal) as advance:
        assert advance is not None
        trace = read_trace(path, progress=advance)
    assert len(trace) == BAR_FROM_BYTES // len(row) + 1
    assert "reading large.jsonl" in screen.getvalue()
    with reading_bar(path, quiet=True, console=terminal) as advance:
        assert advance is None  # --json: no bar
    small = _write(tmp_path / "small.jsonl", [{"prompt_token_ids": [1]}])
    with reading_bar(small, console=terminal) as advance:
        assert advance is None


def test_the_json_keys_are_the_documented_contract(run, tmp_path):
    report = _json(run, _chat_trace(tmp_path / "c.jsonl"), *MODEL)
    assert set(report) == {
        "block_size", "block_size_asked", "requests", "requests_served", "prompt_tokens",
        "cached_tokens", "hit_rate", "prompt_tokens_all", "reusable_tokens",
        "hit_rate_unbounded", "blocks_total", "blocks_distinct", "blocks_shared",
        "pool_tokens_saved", "pool_bytes_saved", "kv_bytes_per_token", "groups",
        "short_prefix_warnings", "source", "model", "pool_blocks", "notes", "ttft",
        "tokenizer"}
    assert set(report["groups"][0]) == {"group", "prefix_tokens", "prefix_blocks", "requests",
                                        "reusable_tokens", "cached_tokens", "first_line",
                                        "first_tokens"}
    docs = (Path(__file__).parents[2] / "docs" / "prefix.md").read_text()
    assert all(f"`{key}`" in docs for key in ("hit_rate", "reusable_tokens", "prompt_tokens",
                                              "blocks_shared", "short_prefix_warnings",
                                              "pool_blocks", "block_size", "ttft"))


@pytest.mark.parametrize("flags, needle", [
    (("--rate", "inf"), "--rate = inf"), (("--rate", "0"), "--rate = 0"),
    (("--output-len", "0", "--no-simulate"), "--output-len = 0"),
    (("--num-gpu-blocks", "1"), "null block"), (("--block-size", "0"), "--block-size = 0"),
])
def test_bad_flags_are_one_line(run, flags, needle):
    trace = Path(__file__).parents[2] / "workloads" / "prefix.jsonl"
    result = run("prefix", trace, *MODEL, *flags)
    assert result.exit_code == 2 and result.stdout == ""
    [line] = result.stderr.strip().splitlines()
    assert needle in line


def test_prompts_past_max_model_len_are_named(run):
    trace = Path(__file__).parents[2] / "workloads" / "prefix.jsonl"
    report = _json(run, trace, *MODEL, "--max-model-len", "300", "--no-simulate")
    assert any(n.startswith("9 prompts are longer than max_model_len (300 tokens)")
               for n in report["notes"])


def test_rate_and_output_len_stand_in_for_missing_fields(run, tmp_path):
    rows = [{"prompt_token_ids": list(range(200)) + [i]} for i in range(6)]
    trace = _write(tmp_path / "bare.jsonl", rows)
    report = _json(run, trace, *MODEL, "--rate", "2", "--output-len", "16")
    assert report["ttft"]["simulated"] and "--rate 2" in report["ttft"]["arrivals"]
    assert report["ttft"]["with_prefix_caching"]["prefill_tokens"] < \
        report["ttft"]["without_prefix_caching"]["prefill_tokens"]


@pytest.mark.parametrize(("n", "said"), [(1, "1 request,"), (2, "2 requests,")])
def test_the_request_count_agrees_with_its_noun(run, tmp_path, n, said):
    """A one-request trace read '1 requests'."""
    result = run("prefix", _chat_trace(tmp_path / "t.jsonl", n=n), *MODEL)
    assert result.exit_code == 0, result.output
    assert said in " ".join(result.stdout.split()), result.stdout
