"""servecap prefix: the prefix-cache hit rate a traffic sample gets under the plan's blocks."""

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from servecap.ledger.errors import SpecError
from servecap.scenario.prefix import analyse
from servecap.scenario.prefix_trace import NO_TOKENIZER, read_trace

from . import sim_options as o
from .errors import handle_errors
from .prefix_view import reading_bar, render_prefix
from .sim_inputs import SimFlags, sim_scenario

Trace = Annotated[Path, typer.Argument(
    help="JSON Lines, one request a line: prompt_token_ids (a list of token ids) or prompt "
    "(text, with --tokenizer); optional arrival_s, output_tokens, cache_salt.",
    show_default=False)]
Model = Annotated[str, typer.Option("--model", help="Bundled model name (servecap models), a "
                                    "model YAML, a config.json, a model directory or a Hub "
                                    "id.", show_default=False)]
Tokenizer = Annotated[str | None, typer.Option(
    "--tokenizer", help="For text prompts: a folder with tokenizer.json, the file, or a Hub "
    "id in the Hub cache (needs the tokenizers package). Default: the model's own, where "
    "--model is a directory or a cached Hub id that has one.")]
NoSim = Annotated[bool, typer.Option("--no-simulate", help="Skip the TTFT simulation.")]
PrefixOutputLen = Annotated[int | None, o.Wkl(
    "--output-len", help="Output tokens of each request in the TTFT simulation, where the "
    "trace gives none (with --rate).")]
PrefixRate = Annotated[float | None, o.Wkl(
    "--rate", "--request-rate", help="Requests/s in the TTFT simulation: one every 1/RATE "
    "seconds in file order, in place of the trace's arrival_s.")]


def prefix(trace: Trace, model: Model, device: o.PrefixDevice = None, bandwidth: o.Bandwidth = None,
           flops: o.Flops = None, block_size: o.BlockSize = o.DEFAULT_BLOCK_SIZE_TOKENS,
           num_gpu_blocks: o.NumGpuBlocks = None, context: o.Context = None,
           weight_dtype: o.WeightDtype = None, kv_dtype: o.KvDtype = None,
           tensor_parallel_size: o.TensorParallel = 1, engine: o.PrefixEngine = None,
           tokenizer: Tokenizer = None, rate: PrefixRate = None, output_len: PrefixOutputLen = None,
           no_simulate: NoSim = False, as_json: o.Json = False) -> None:
    """Prefix-cache hit rate of a traffic sample: the prompt tokens vLLM would find cached.

    Only FULL --block-size blocks are cached, each named by a hash chained over every block
    before it, so a request reuses the longest run of blocks it shares with an earlier one
    from its first token, and a shared prefix shorter than one block reuses nothing (a
    warning says so). hit_rate is vLLM's figure (cached / prompt tokens) in the plan's KV
    pool, LRU eviction, one request at a time; hit_rate_unbounded never evicts. Also: the
    pool tokens the shared blocks save, each prefix group, and simulate's TTFT with and
    without prefix caching (arrival_s and output_tokens from the trace, or --rate and
    --output-len). Examples:

      servecap prefix workloads/prefix.jsonl --model llama-3.1-8b --device h100-80gb
      servecap prefix chats.jsonl --model Qwen/Qwen2.5-7B-Instruct --device l4 \\
          --tokenizer Qwen/Qwen2.5-7B-Instruct --num-gpu-blocks 2000 --json

    Trace format and figures: docs/prefix.md.
    """
    used: dict = {}
    encode = text_encoder(tokenizer, model, used)
    flags = SimFlags(device=device, bandwidth=bandwidth, flops=flops, block_size=block_size,
                     num_gpu_blocks=num_gpu_blocks, context=context,
                     weight_dtype=weight_dtype, kv_dtype=kv_dtype,
                     tensor_parallel_size=tensor_parallel_size, engine=engine)
    scenario = sim_scenario(model, flags)
    with reading_bar(trace, quiet=as_json) as advance:
        requests = read_trace(trace, encode, advance)
    report = analyse(scenario, requests, str(trace), rate, output_len, not no_simulate)
    report["tokenizer"] = used.get("name")
    if as_json:
        print(json.dumps(report, indent=2, allow_nan=False))
    else:
        render_prefix(report, Console())


def text_encoder(tokenizer: str | None, model: str, used: dict):
    """Token ids for a text prompt, loaded at the first text line: --tokenizer's, else the
    model's own (a model directory's tokenizer.json, or a Hub id's in the Hub cache); the
    name used is kept in `used` for the report. Without either, one line says what to do."""
    def encode(text: str) -> list[int]:
        if "tok" not in used:
            from servecap.load.tokenize import load_tokenizer

            try:
                used["tok"] = load_tokenizer(tokenizer or model)
            except SpecError as exc:
                if tokenizer is not None or "tokenizers" in exc.allowed:
                    raise
                raise SpecError("--tokenizer", None, f"{NO_TOKENIZER} ({model} has no "
                                "tokenizer.json here)") from None
            used["name"] = tokenizer or model
        return used["tok"].ids(text)
    return encode


def register(app: typer.Typer) -> None:
    app.command()(handle_errors(prefix))

