"""The ShareGPT length sample the published ShareGPT runs are simulated with: ShareGPT V3's
first turns (tests/fixtures/vllm_bench/sharegpt_v3_first_turn_lengths.csv, SOURCE.md) under
the benchmarks' filter, drawn as the benchmarks draw (a seeded shuffle), with the client's EOS
rule; and the published draws' means it is checked against."""

import csv
import json
import random
import statistics
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "vllm_bench"
SHAREGPT = "sharegpt_llama3_lengths.json"
# Per-conversation first-turn token counts of ShareGPT V3, the pair the benchmarks take
# (prompt = turn 0, output = turn 1), under the Llama-3 and the Mistral tokenizer (SOURCE.md)
SHAREGPT_SAMPLE = "sharegpt_v3_first_turn_lengths.csv"
# The ShareGPT filter of vLLM's benchmark_serving.py / benchmark_throughput.py and SGLang's
# bench_serving.py: prompts or outputs under 4 tokens, prompts over 1,024 tokens and
# prompt + output over 2,048 tokens are dropped
SHAREGPT_MIN_TOKENS, SHAREGPT_MAX_PROMPT, SHAREGPT_MAX_TOTAL = 4, 1024, 2048
SHAREGPT_SEED = 0  # benchmark_serving.py's --seed default
# SGLang's vLLM 0.6.0 runs: the 5,000-prompt one generates every output to its dataset length
SGLANG_RUNS = "sglang_vllm060_a100_h100.json"


def sharegpt_means(folder: Path = FIXTURES) -> tuple[int, int]:
    """(prompt, output) tokens per request of the ShareGPT reference run, rounded."""
    m = json.loads((folder / SHAREGPT).read_text(encoding="utf-8"))["measured"]
    n = m["successful_requests"]
    return round(m["total_input_tokens"] / n), round(m["total_generated_tokens"] / n)


def sharegpt_keep(prompt: int, output: int) -> bool:
    """Whether the benchmarks' ShareGPT filter keeps a (prompt, output) pair."""
    return prompt >= SHAREGPT_MIN_TOKENS and output >= SHAREGPT_MIN_TOKENS \
        and prompt <= SHAREGPT_MAX_PROMPT and prompt + output <= SHAREGPT_MAX_TOTAL


def sharegpt_pool(folder: Path = FIXTURES, tokenizer: str = "llama3") -> list[tuple[int, int]]:
    """The (prompt, output) token pairs of the ShareGPT sample under `tokenizer` that the
    benchmarks' filter keeps, in the file's order."""
    with (folder / SHAREGPT_SAMPLE).open(encoding="utf-8", newline="") as f:
        pairs = [(int(r[f"prompt_{tokenizer}"]), int(r[f"output_{tokenizer}"]))
                 for r in csv.DictReader(f)]
    return [pair for pair in pairs if sharegpt_keep(*pair)]


def sharegpt_targets(folder: Path = FIXTURES) -> dict[str, float]:
    """The mean tokens per request of the benchmarks' published ShareGPT draws under the
    Llama-3 tokenizer: prompts and (client stopping at EOS) outputs from the 1,000-prompt
    reference run; outputs with ignore_eos (every output runs to the dataset's length) from
    SGLang's 5,000-prompt run (its output tokens per second over its requests per second)."""
    m = json.loads((folder / SHAREGPT).read_text(encoding="utf-8"))["measured"]
    runs = json.loads((folder / SGLANG_RUNS).read_text(encoding="utf-8"))["groups"]
    sg = next(r for g in runs for r in g["runs"] if r["id"] == "a100-8b-inf")["measured"]
    n = m["successful_requests"]
    return {"prompt": m["total_input_tokens"] / n, "output": m["total_generated_tokens"] / n,
            "output_ignore_eos": sg["output_throughput_tok_s"] / sg["request_throughput_rps"]}


def sharegpt_eos_ratio(folder: Path = FIXTURES) -> float:
    """How much of the dataset's output a client that stops at EOS gets, on average: the
    reference run's generated tokens per request over the filtered sample's output mean
    (Llama-3 tokenizer, the reference run's)."""
    return sharegpt_targets(folder)["output"] / \
        statistics.fmean(o for _, o in sharegpt_pool(folder))


def sharegpt_draw(count: int, folder: Path = FIXTURES, ignore_eos: bool = False,
                  seed: int = SHAREGPT_SEED, tokenizer: str = "llama3") -> list[tuple[int, int]]:
    """`count` pairs of the filtered sample, as the benchmarks draw them: the pool shuffled
    with a fixed seed and taken in order (reshuffled for sets larger than the pool). With
    ignore_eos every output runs to the dataset's length, the pair as counted; a client that
    stops at EOS gets sharegpt_eos_ratio of each. A resample of the same dataset, not the
    benchmark's own draw of it."""
    rng, pool, out = random.Random(seed), sharegpt_pool(folder, tokenizer), []
    if not ignore_eos:
        ratio = sharegpt_eos_ratio(folder)
        pool = [(p, max(1, round(o * ratio))) for p, o in pool]
    while len(out) < count:
        rng.shuffle(pool)
        out.extend(pool[:count - len(out)])
    return out
