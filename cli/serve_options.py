"""The option groups `servecap serve` takes, declared once, each in its --help panel (vLLM's
flag names); serve receives one value per group."""

import functools
from dataclasses import dataclass
from typing import Annotated

import typer

from servecap.ledger.serve import DEFAULT_MAX_NUM_BATCHED_TOKENS, DEFAULT_MAX_NUM_SEQS
from servecap.runtime.server import limits
from servecap.scenario.spec import DEFAULT

Pool = functools.partial(typer.Option, rich_help_panel="KV pool and admission")
Edge = functools.partial(typer.Option, rich_help_panel="Edge limits")


@dataclass(frozen=True)
class ServePool:
    """The KV pool the server plans and how it admits (vLLM's names)."""

    device_memory: Annotated[str | None, Pool(help="Device size the KV pool is planned for "
                                                   "(40GiB). Default: the model file's "
                                                   "device, else the whole GPU.")] = None
    context: Annotated[int | None, Pool("--max-model-len", "--context",
                                       help="Longest prompt + output per request.")] = None
    block_size: Annotated[int | None, Pool(help="Paged KV block size in tokens.")] = None
    max_num_seqs: Annotated[int, Pool(help="Most sequences in one step.")] = DEFAULT_MAX_NUM_SEQS
    max_num_batched_tokens: Annotated[int, Pool(help="Tokens per forward pass.")] = \
        DEFAULT_MAX_NUM_BATCHED_TOKENS
    num_kv_blocks: Annotated[int | None, Pool(help="KV pool size in blocks (default: what the "
                                                   "ledger's plan leaves).")] = None
    admission: Annotated[str, Pool(help="reserve (blocks for the whole request before "
                                        "admitting; never preempts) or optimistic (vLLM: the "
                                        "prompt's blocks; preempts by recompute).")] = \
        DEFAULT.runtime.admission


@dataclass(frozen=True)
class ServeEdge:
    """The server's edge: the waiting bound, the API key, body and time limits."""

    max_waiting: Annotated[int, Edge(help="Requests that may wait for admission; beyond, "
                                          "HTTP 429.")] = DEFAULT.server.max_waiting
    api_key: Annotated[str | None, Edge(envvar="VLLM_API_KEY", show_envvar=True,
                                       help="Require 'Authorization: Bearer KEY' on /v1/* "
                                            "(401 without it; /health and /metrics stay open), "
                                            "as vLLM's --api-key.")] = None
    max_request_bytes: Annotated[int, Edge(
        help=f"Largest request body in bytes ({limits.DEFAULT_MAX_REQUEST_BYTES / 2**20:g} MiB "
             "by default); a bigger one is HTTP 413.", show_default=False)] = \
        limits.DEFAULT_MAX_REQUEST_BYTES
    header_timeout: Annotated[float, Edge(help="Seconds a connection may take to send a "
                                               "request's headers; then it is closed.")] = \
        limits.DEFAULT_HEADER_TIMEOUT_S
    body_timeout: Annotated[float, Edge(help="Seconds a request may take to send its body; "
                                             "then HTTP 408.")] = limits.DEFAULT_BODY_TIMEOUT_S
    shutdown_timeout: Annotated[float, Edge(help="On SIGTERM/Ctrl-C, seconds running "
                                                 "requests may take to finish; the rest then end "
                                                 "with an error event.")] = \
        limits.DEFAULT_SHUTDOWN_TIMEOUT_S
