"""Build the engine, tokenizer and app for `servecap serve`, then run uvicorn until stopped."""

import sys
from dataclasses import dataclass, replace
from pathlib import Path

from servecap.ledger.errors import SpecError
from servecap.ledger.model import ModelSpec
from servecap.ledger.serve import ServeSpec
from servecap.runtime.engine import Engine

from .edge import EdgeOptions
from .limits import DEFAULT_HEADER_TIMEOUT_S, DEFAULT_SHUTDOWN_TIMEOUT_S
from .prom_metrics import ServerMetrics
from .serving_loop import ServingLoop
from .tokenizer import load_tokenizer


@dataclass(frozen=True)
class ServerOptions:
    model_name: str
    model_dir: Path | None = None
    device: str = "cpu"
    host: str = "127.0.0.1"
    port: int = 8000
    seed: int = 0
    weights: str | None = None
    tokenizer: str | None = None
    num_kv_blocks: int | None = None
    max_waiting: int = 1024
    reserve_full_context: bool = True
    whole_device: bool = False  # plan the KV pool for the GPU's total memory
    edge: EdgeOptions = EdgeOptions()
    header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S
    shutdown_timeout_s: float = DEFAULT_SHUTDOWN_TIMEOUT_S


def build_serving(spec: ModelSpec, serve: ServeSpec, opts: ServerOptions):
    """(app, engine): the FastAPI app over one engine loop; nothing is served yet."""
    from .openai_server import create_app

    if opts.whole_device:
        serve = replace(serve, device_bytes=_total_bytes(opts.device))
    engine = Engine.from_spec(spec, serve, device=opts.device, seed=opts.seed,
                              weights_dir=opts.weights, num_blocks=opts.num_kv_blocks,
                              reserve_full_context=opts.reserve_full_context)
    folders = [Path(f) for f in (opts.tokenizer, opts.weights, opts.model_dir) if f]
    tokenizer = load_tokenizer(folders, spec.vocab_size)
    metrics = ServerMetrics(opts.model_name)
    serving = ServingLoop(engine, metrics, opts.max_waiting, tokenizer.eos_token_ids)
    app = create_app(serving, metrics, tokenizer, opts.model_name, serve.context_tokens,
                     opts.edge)
    return app, serving, tokenizer


def check_port(host: str, port: int) -> None:
    """Refuse a host:port that cannot be listened on (in use, not this machine's) before the
    weights load, as one line and exit 2: uvicorn would log it and exit 3 after loading."""
    import socket

    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port,
                                                             type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
            probe.bind(address)
    except OSError as exc:
        raise SpecError("--port", port, f"cannot listen on {host}:{port} "
                        f"({exc.strerror or exc}); pick a free port or stop what holds "
                        "it") from None


def run_server(spec: ModelSpec, serve: ServeSpec, opts: ServerOptions) -> None:
    from .transport import serve_app

    check_port(opts.host, opts.port)
    app, serving, tokenizer = build_serving(spec, serve, opts)
    engine = serving.engine
    blocks = engine.blocks
    print(f"servecap serve: {opts.model_name} on http://{opts.host}:{opts.port}/v1 "
          f"({opts.device}; {blocks.num_blocks:,} KV blocks of {blocks.block_size_tokens} "
          f"tokens; max_model_len {serve.context_tokens:,}; max_num_seqs "
          f"{engine.config.max_num_seqs}; up to {opts.max_waiting:,} waiting, then 429; "
          f"tokenizer: {tokenizer.name}; API key: "
          f"{'required' if opts.edge.api_key else 'none'})", file=sys.stderr, flush=True)
    if opts.edge.api_key is None and opts.host not in ("127.0.0.1", "localhost", "::1"):
        print(f"servecap serve: warning: listening on {opts.host} without --api-key: anyone "
              "who can reach the port can generate", file=sys.stderr, flush=True)
    serve_app(app, serving, opts.host, opts.port, opts.header_timeout_s,
              opts.shutdown_timeout_s)


def _total_bytes(device: str) -> int:
    import torch

    return torch.cuda.get_device_properties(torch.device(device)).total_memory
