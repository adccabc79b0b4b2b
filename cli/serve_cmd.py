"""`servecap serve`: servecap's paged-KV runtime behind an OpenAI-compatible HTTP API."""

from pathlib import Path
from typing import Annotated

import typer

from servecap.ledger.errors import SpecError
from servecap.ledger.serve import DEFAULT_MAX_NUM_BATCHED_TOKENS, DEFAULT_MAX_NUM_SEQS
from servecap.model_configs import load_model
from servecap.runtime.server import limits

from .errors import handle_errors
from .extras import RUNTIME, SERVER, need
from .inputs import PlanFlags, serve_spec

Opt = typer.Option


def serve(
    model: Annotated[str, typer.Argument(help="Bundled model name, a model YAML, a config.json "
                                         "or a local model directory.")],
    device: Annotated[str, Opt(help="cpu, cuda or cuda:N.")] = "cpu",
    host: Annotated[str, Opt(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, Opt(help="TCP port.")] = 8000,
    served_model_name: Annotated[str | None, Opt(help="The `model` clients send (default: "
                                                 "MODEL as given).")] = None,
    device_memory: Annotated[str | None, Opt(help="Device size the KV pool is planned for "
                                             "(40GiB). Default: the model file's device, else "
                                             "the whole GPU.")] = None,
    context: Annotated[int | None, Opt("--max-model-len", "--context",
                                       help="Longest prompt + output per request.")] = None,
    block_size: Annotated[int | None, Opt(help="Paged KV block size in tokens.")] = None,
    max_num_seqs: Annotated[int, Opt(help="Most sequences in one step.")] = DEFAULT_MAX_NUM_SEQS,
    max_num_batched_tokens: Annotated[int, Opt(help="Tokens per forward pass.")]
    = DEFAULT_MAX_NUM_BATCHED_TOKENS,
    num_kv_blocks: Annotated[int | None, Opt(help="KV pool size in blocks (default: what the "
                                             "ledger's plan leaves).")] = None,
    max_waiting: Annotated[int, Opt(help="Requests that may wait for admission; beyond, "
                                    "HTTP 429.")] = 1024,
    admission: Annotated[str, Opt(help="reserve (blocks for the whole request before "
                                  "admitting; never preempts) or optimistic (vLLM: the "
                                  "prompt's blocks; preempts by recompute).")] = "reserve",
    weights: Annotated[str | None, Opt(help="Local safetensors directory (default: seeded "
                                       "random weights).")] = None,
    tokenizer: Annotated[str | None, Opt(help="tokenizer.json or its folder (default: the "
                                         "model or weights folder's; else a byte-level "
                                         "stand-in).")] = None,
    seed: Annotated[int, Opt(help="Seed for random weights.")] = 0,
    api_key: Annotated[str | None, Opt(envvar="VLLM_API_KEY", show_envvar=True,
                                       help="Require 'Authorization: Bearer KEY' on /v1/* "
                                       "(401 without it; /health and /metrics stay open), "
                                       "as vLLM's --api-key.")] = None,
    max_request_bytes: Annotated[int, Opt(help="Largest request body; a bigger one is "
                                          "HTTP 413.")] = limits.DEFAULT_MAX_REQUEST_BYTES,
    header_timeout: Annotated[float, Opt(help="Seconds a connection may take to send a "
                                         "request's headers; then it is closed.")]
    = limits.DEFAULT_HEADER_TIMEOUT_S,
    body_timeout: Annotated[float, Opt(help="Seconds a request may take to send its body; "
                                       "then HTTP 408.")] = limits.DEFAULT_BODY_TIMEOUT_S,
    shutdown_timeout: Annotated[float, Opt(help="On SIGTERM/Ctrl-C, seconds running "
                                           "requests may take to finish; the rest then end "
                                           "with an error event.")]
    = limits.DEFAULT_SHUTDOWN_TIMEOUT_S,
) -> None:
    """Serve MODEL on /v1/completions, /v1/chat/completions, /v1/models, /health, /metrics.

    One engine loop batches every request (docs/serve.md). Stop with Ctrl-C. Examples:

      servecap serve tiny-llama --port 8000          # seeded tiny model on the CPU
      servecap serve ./Llama-3.1-8B --device cuda:0 --weights ./Llama-3.1-8B --port 8000
    """
    need("serve", RUNTIME | SERVER)
    if admission not in ("reserve", "optimistic"):
        raise SpecError("--admission", admission, "allowed: reserve, optimistic")
    if not 0 < port < 65536:
        raise SpecError("--port", port, "a TCP port in 1..65535")
    if max_waiting < 0:
        raise SpecError("--max-waiting", max_waiting, "must be >= 0 requests")
    edge = _edge(api_key, max_request_bytes, body_timeout)
    for flag, value in (("--header-timeout", header_timeout),
                        ("--shutdown-timeout", shutdown_timeout)):
        _seconds(flag, value, 0 if flag == "--shutdown-timeout" else 0.001)
    from servecap.runtime.server.launch import ServerOptions, run_server
    from servecap.runtime.telemetry import check_device

    check_device(device)
    if tokenizer is not None:
        found = Path(tokenizer)
        if not (found.is_file() or (found / "tokenizer.json").is_file()):
            raise SpecError("--tokenizer", tokenizer, "a tokenizer.json or a folder holding "
                            "one (without the flag: the model's, else a byte-level stand-in)")

    loaded = load_model(model)
    size = device_memory or loaded.serving.device
    if size is None and device == "cpu":
        raise SpecError("--device-memory", None, "required on the CPU (this model file states "
                        "no device): the size the KV pool is planned for, e.g. 2GiB")
    flags = PlanFlags(device=size or "1GiB", context=context,
                      block_size=block_size, max_num_batched_tokens=max_num_batched_tokens,
                      max_num_seqs=max_num_seqs)
    spec_serve = serve_spec(flags, loaded)
    longest = loaded.spec.max_position_embeddings
    if longest and spec_serve.context_tokens > longest:
        raise SpecError("--max-model-len", spec_serve.context_tokens, f"at most the model's "
                        f"max_position_embeddings ({longest:,}), as verify refuses it")
    model_dir = loaded.path if loaded.path.is_dir() else None
    run_server(loaded.spec, spec_serve, ServerOptions(
        served_model_name or model, model_dir and Path(model_dir), device, host, port, seed,
        weights, tokenizer, num_kv_blocks, max_waiting, admission == "reserve",
        whole_device=size is None, edge=edge, header_timeout_s=header_timeout,
        shutdown_timeout_s=shutdown_timeout))


def _edge(api_key: str | None, max_request_bytes: int, body_timeout: float):
    from servecap.runtime.server.edge import EdgeOptions

    if api_key is not None and not api_key.strip():
        raise SpecError("--api-key", api_key, "a non-empty key (or leave it unset)")
    if not 1024 <= max_request_bytes <= 2**31:
        raise SpecError("--max-request-bytes", max_request_bytes, "bytes in 1,024..2^31")
    _seconds("--body-timeout", body_timeout, 0.001)
    return EdgeOptions(api_key, max_request_bytes, body_timeout)


def _seconds(flag: str, value: float, least: float) -> None:
    if not least <= value <= 86_400:
        raise SpecError(flag, value, f"seconds in {least:g}..86,400")


def register(app: typer.Typer) -> None:
    app.command()(handle_errors(serve))
