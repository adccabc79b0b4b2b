"""The prefix-analysis trace reader: JSON Lines read in file order, compactly held, each
byte reported to the progress bar, every bad value named by line and field."""

import json

import pytest

from servecap.ledger.errors import SpecError
from servecap.ledger.prefix_cache import Prompt, reuse
from servecap.scenario.prefix_trace import read_trace


def test_lines_are_read_in_order_and_every_byte_is_reported(tmp_path):
    rows = [{"prompt_token_ids": list(range(40)) + [i], "arrival_s": 3 - i,
             "output_tokens": 5, "cache_salt": "tenant-a"} for i in range(3)]
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows[:2]) + "\n\n" + json.dumps(rows[2]))
    seen = []
    trace = read_trace(path, progress=seen.append)
    assert sum(seen) == path.stat().st_size
    assert [r.line for r in trace] == [1, 2, 4]  # the blank line is skipped, not renumbered
    assert [r.arrival_s for r in trace] == [3.0, 2.0, 1.0]  # file order, not arrival order
    assert trace[0].prompt.tokens.itemsize == 8 and trace[0].prompt.salt == "tenant-a"


def test_compact_token_ids_reuse_as_tuples_do(tmp_path):
    rows = [list(range(50)) + [i] * 9 for i in range(4)] + [[7, 8, 9] + [i] * 30
                                                            for i in range(3)]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps({"prompt_token_ids": r}) + "\n" for r in rows))
    read = reuse([r.prompt for r in read_trace(path)], 16, 20)
    plain = reuse([Prompt(tuple(r)) for r in rows], 16, 20)
    assert read == plain and read.reusable_tokens == 3 * 48
    assert [(s.prefix_tokens, s.requests) for s in read.short_prefixes] == [(3, 3)]


@pytest.mark.parametrize("text, where", [
    (b"\xff\xfe\n", "line 1"),
    (b'{"prompt_token_ids": [1, 9223372036854775808]}\n', "line 1, prompt_token_ids"),
    (b'[1, 2]\n', "line 1"),
    (b'{"prompt_token_ids": [1], "cache_salt": 3}\n', "line 1, cache_salt"),
    (b"\n\n", "requests"),
])
def test_a_bad_trace_names_its_line_and_field(tmp_path, text, where):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(text)
    with pytest.raises(SpecError) as err:
        read_trace(path)
    assert err.value.source == str(path) and err.value.field.startswith(where)


def test_a_missing_file_is_one_error(tmp_path):
    with pytest.raises(SpecError, match="cannot be read"):
        read_trace(tmp_path / "absent.jsonl")


def test_the_too_long_note_agrees_with_its_count():
    """'1 prompts are longer ... refuses them' read wrong for a single prompt."""
    from servecap.ledger.prefix_cache import Prompt
    from servecap.scenario.prefix import too_long
    from servecap.scenario.prefix_trace import TraceRequest

    def trace(*lengths):
        return [TraceRequest(i + 1, Prompt(tuple(range(n)))) for i, n in enumerate(lengths)]

    (one,) = too_long(trace(10, 50), 20)
    assert one.startswith("1 prompt is longer than max_model_len (20 tokens): vLLM refuses it")
    (two,) = too_long(trace(30, 50), 20)
    assert two.startswith("2 prompts are longer") and "refuses them" in two
    assert too_long(trace(10), 20) == []
