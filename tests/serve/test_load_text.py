"""`servecap load` with text: chat and completions prompts, a dataset in each common shape,
counted with the server's tokenizer and checked against its usage; conversations whose
later turns find their history in the prefix cache."""

import csv
import json

import pytest
from serve_process import Server, servecap
from word_tokenizer import write_word_tokenizer

pytest.importorskip("tokenizers")

ROWS = [
    {"conversations": [{"from": "system", "value": "You answer in one line."},
                       {"from": "human", "value": "What is the time of the day?"},
                       {"from": "gpt", "value": "It is the first day of the year."},
                       {"from": "human", "value": "And where are we now?"},
                       {"from": "gpt", "value": "We are here, in the old state."}]},
    {"prompt": "Tell me about the world and its people.", "output_tokens": 12},
    {"messages": [{"role": "user", "content": [{"type": "text", "text": "How long "},
                                               {"type": "text", "text": "is a year?"}]}],
     "max_tokens": 7},
    {"messages": [{"role": "system", "content": "Be brief."},
                  {"role": "user", "content": "Can you make it work?"},
                  {"role": "assistant", "content": "Yes, I can make it work for you."},
                  {"role": "user", "content": "Then do it."}], "output_tokens": 5},
]
TURNS = 2 + 1 + 1 + 2


@pytest.fixture(scope="module")
def text_server(tmp_path_factory):
    tok = write_word_tokenizer(tmp_path_factory.mktemp("tok"))
    srv = Server("--tokenizer", str(tok), "--max-model-len", "2048")
    srv.tokenizer = tok
    yield srv
    srv.stop()


def _load(server, *args, records=None) -> dict:
    extra = ("--records", str(records)) if records else ()
    run = servecap("load", server.url + "/v1", "--tokenizer", str(server.tokenizer), "--json",
                   *map(str, args), *extra, timeout=180)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_a_dataset_completes_and_its_prompt_counts_equal_the_servers_usage(
        text_server, tmp_path, endpoint):
    data = tmp_path / "d.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in ROWS) + "\n\n")
    records = tmp_path / "r.csv"
    report = _load(text_server, "--endpoint", endpoint, "--dataset", data, "--concurrency", 2,
                   records=records)
    assert report["offered"] == report["completed"] == TURNS and report["failed"] == 0
    assert report["prompt_tokens_checked"] == TURNS
    assert report["prompt_token_mismatches"] == 0, report["prompt_token_mismatch_examples"]
    assert report["output_token_mismatches"] == 0
    rows = list(csv.DictReader(records.open()))
    # lengths: the row's output_tokens / max_tokens, else the reference answer's tokens
    assert sorted(int(r["output_tokens"]) for r in rows) == sorted([9, 9, 12, 7, 5, 5])
    assert [t["requests"] for t in report["turns"]] == [4, 2]
    second = report["turns"][1]["mean_prompt_tokens"]
    assert second > report["turns"][0]["mean_prompt_tokens"]  # the history rides along


def test_synthetic_chat_prompts_have_the_requested_token_length(text_server, tmp_path):
    (tmp_path / "t.csv").write_text("arrival_s,prompt_tokens,output_tokens\n"
                                    "0,40,4\n0.01,90,6\n0.02,17,3\n")
    records = tmp_path / "r.csv"
    report = _load(text_server, "--endpoint", "chat", "--trace", tmp_path / "t.csv",
                   records=records)
    assert report["completed"] == 3 and report["prompt_token_mismatches"] == 0
    assert [int(r["prompt_tokens"]) for r in csv.DictReader(records.open())] == [40, 90, 17]


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_three_turns_find_more_of_their_prompt_in_the_prefix_cache_each_turn(
        text_server, tmp_path, endpoint):
    (tmp_path / "t.csv").write_text("arrival_s,prompt_tokens,output_tokens\n"
                                    "0,40,6\n0.3,40,6\n")
    report = _load(text_server, "--endpoint", endpoint, "--trace", tmp_path / "t.csv",
                   "--turns", 3, "--think-time", "20ms", "--shared-prefix", 32,
                   "--metrics", text_server.url + "/metrics")
    assert report["completed"] == 6 and report["prompt_token_mismatches"] == 0
    turns = report["turns"]
    assert [t["requests"] for t in turns] == [2, 2, 2]
    cached = [t["mean_cached_prompt_tokens"] for t in turns]
    assert cached[0] >= 16 and cached[0] < cached[1] < cached[2], cached  # the second hits 32
    prompts = [t["mean_prompt_tokens"] for t in turns]
    assert prompts[0] == 72 and prompts[0] < prompts[1] < prompts[2]
    server = report["server_metrics"]
    assert server["prefix_cache_hit_tokens"] == sum(t["cached_prompt_tokens"] for t in turns)
    assert server["prefix_cache_queried_tokens"] == sum(p * 2 for p in prompts)


def test_token_id_conversations_share_their_history_through_the_cache(server, tmp_path):
    (tmp_path / "t.csv").write_text("arrival_s,prompt_tokens,output_tokens\n0,40,6\n")
    run = servecap("load", server.url + "/v1", "--trace", tmp_path / "t.csv", "--turns", "3",
                   "--json")
    assert run.returncode == 0, run.stderr
    turns = json.loads(run.stdout)["turns"]
    assert [t["mean_prompt_tokens"] for t in turns] == [40, 86, 132]  # + 6 answer + 40 new
    cached = [t["cached_prompt_tokens"] for t in turns]
    assert cached[0] < cached[1] < cached[2] and cached[2] >= 80, cached


@pytest.fixture(scope="module")
def word_tok(tmp_path_factory):
    from servecap.load.tokenize import load_tokenizer

    return load_tokenizer(str(write_word_tokenizer(tmp_path_factory.mktemp("wt"))))


def test_made_up_text_has_the_token_count_asked_for(word_tok):
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from servecap.load.synth import words_text

    @settings(max_examples=60, deadline=None)
    @given(st.integers(0, 600), st.text(max_size=8))
    def check(count, key):
        text = words_text(word_tok, count, key)
        assert word_tok.count(text) == count
        assert words_text(word_tok, count, key) == text  # seeded

    check()


def test_a_hub_id_is_found_in_the_local_hub_cache_never_fetched(tmp_path, monkeypatch):
    """The Hub cache's own layout (models--ORG--NAME/refs/main naming a snapshot), as
    huggingface_hub writes it; an id not in the cache is one line, no network."""
    from servecap.ledger.errors import SpecError
    from servecap.load.tokenize import load_tokenizer

    repo = tmp_path / "hub" / "models--acme--tiny-chat"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("0123abcd" * 5)
    write_word_tokenizer(repo / "snapshots" / ("0123abcd" * 5))
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    tok = load_tokenizer("acme/tiny-chat")
    assert tok.count("user : the world") == 4
    with pytest.raises(SpecError, match="Hub cache"):
        load_tokenizer("acme/not-downloaded")


def test_a_dataset_scenario_sends_the_same_conversations_again(text_server, tmp_path):
    """--save-scenario keeps the dataset (relative to the file), the tokenizer, the endpoint,
    the rate and its seed: --scenario, run from elsewhere, sends the same turns at the same
    planned times."""
    (tmp_path / "d.jsonl").write_text("\n".join(json.dumps(r) for r in ROWS) + "\n")
    (tmp_path / "conf").mkdir()
    runs = []
    for cwd, args in ((tmp_path, ("--tokenizer", text_server.tokenizer, "--endpoint", "chat",
                                  "--dataset", "d.jsonl", "--rate", 8, "--seed", 4,
                                  "--turns", 1, "--save-scenario", "conf/chat.yaml")),
                      (tmp_path / "conf", ("--scenario", "chat.yaml"))):
        records = tmp_path / f"{len(runs)}.csv"
        run = servecap("load", text_server.url + "/v1", "--json", "--records", str(records),
                       *map(str, args), timeout=180, cwd=cwd)
        assert run.returncode == 0, run.stderr
        rows = csv.DictReader(records.open())
        runs.append((json.loads(run.stdout), [(r["request_id"], r["arrival_s"],
                                               r["prompt_tokens"], r["output_tokens"])
                                              for r in rows]))
    text = (tmp_path / "conf" / "chat.yaml").read_text()
    assert "dataset: ../d.jsonl" in text and "endpoint: chat" in text and "seed: 4" in text
    assert f"tokenizer: {text_server.tokenizer}" in text
    (first, sent), (again, sent2) = runs
    assert sent2 == sent and len(sent) == len(ROWS)  # one turn of each conversation
    assert again["prompt_token_mismatches"] == first["prompt_token_mismatches"] == 0
    assert (first["source"], again["source"]) == ("d.jsonl", "../d.jsonl")
