"""`servecap serve`: servecap's paged-KV runtime behind an OpenAI-compatible HTTP API."""

from pathlib import Path
from typing import Annotated

import typer

from servecap.ledger.errors import SpecError
from servecap.ledger.serve import DEFAULT_MAX_NUM_BATCHED_TOKENS, DEFAULT_MAX_NUM_SEQS
from servecap.model_configs import load_model
from servecap.runtime.server import limits
from servecap.scenario.spec import DEFAULT, Scenario, with_values

from .errors import handle_errors
from .extras import RUNTIME, SERVER, need
from .inputs import PlanFlags, serve_spec
from .option_groups import options_from
from .scenario_opts import SaveScenario, ScenarioFile, from_flags, merged, save
from .serve_options import ServeEdge, ServePool

Opt = typer.Option


@options_from(ServeEdge, "edge_opts", after="save_scenario")
@options_from(ServePool, "pool", after="served_model_name")
def serve(
    ctx: typer.Context,
    model: Annotated[str | None, typer.Argument(
        help="Bundled model name, a model YAML, a config.json or a local model directory; "
        "may come from --scenario instead.", show_default=False)] = None,
    device: Annotated[str, Opt(help="cpu, cuda or cuda:N.")] = DEFAULT.runtime.run_on,
    host: Annotated[str, Opt(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, Opt(help="TCP port.")] = 8000,
    served_model_name: Annotated[str | None, Opt(help="The `model` clients send (default: "
                                                 "MODEL as given).")] = None,
    weights: Annotated[str | None, Opt(help="Local safetensors directory (default: seeded "
                                       "random weights).")] = None,
    tokenizer: Annotated[str | None, Opt(help="tokenizer.json or its folder (default: the "
                                         "model or weights folder's; else a byte-level "
                                         "stand-in).")] = None,
    seed: Annotated[int, Opt(help="Seed for random weights.")] = DEFAULT.runtime.seed,
    verbose: Annotated[bool, Opt("--verbose", "-v", help="Say which flags replaced the "
                                 "--scenario file's fields (stderr).")] = False,
    scenario_file: ScenarioFile = None,
    save_scenario: SaveScenario = None,
    pool: ServePool = None,
    edge_opts: ServeEdge = None,
) -> None:
    """Serve MODEL on /v1/completions, /v1/chat/completions, /v1/models, /health, /metrics.

    One engine loop batches every request (docs/serve.md). Stop with Ctrl-C. Examples:

      servecap serve tiny-llama --port 8000          # seeded tiny model on the CPU
      servecap serve ./Llama-3.1-8B --device cuda:0 --weights ./Llama-3.1-8B --port 8000
      servecap serve tiny-llama --device-memory 2GiB --save-scenario s.yaml
      servecap serve --scenario s.yaml --port 8001   # the same server again

    The address (--host, --port) and --api-key are the run's, never the scenario's.
    """
    need("serve", RUNTIME | SERVER)
    api_key = edge_opts.api_key
    scenario = _server_scenario(merged(ctx, from_flags(ctx.params, SERVE_PATHS), SERVE_PATHS,
                                       scenario_file, verbose))
    srv, sched, run = scenario.server, scenario.scheduler, scenario.runtime
    model, device, device_memory = scenario.model.ref, run.run_on, scenario.device.name
    context, block_size, max_waiting = sched.max_model_len, sched.block_size, srv.max_waiting
    max_num_seqs, max_num_batched_tokens = sched.max_num_seqs, sched.max_num_batched_tokens
    num_kv_blocks, admission, weights = scenario.memory.num_gpu_blocks_override, \
        run.admission, run.weights
    tokenizer, seed, served_model_name = srv.tokenizer, run.seed, srv.served_model_name
    max_request_bytes, header_timeout = srv.max_request_bytes, srv.header_timeout
    body_timeout, shutdown_timeout = srv.body_timeout, srv.shutdown_timeout
    if model is None:
        raise SpecError("MODEL", None, "a model to serve (bundled name, model YAML, "
                        "config.json or directory), or --scenario FILE naming one")
    _served_as_described(scenario)
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
    save(scenario, save_scenario, in_effect={
        "device.name": size, "scheduler.max_model_len": spec_serve.context_tokens,
        "scheduler.block_size": spec_serve.block_size_tokens})
    run_server(loaded.spec, spec_serve, ServerOptions(
        served_model_name, model_dir and Path(model_dir), device, host, port, seed,
        weights, tokenizer, num_kv_blocks, max_waiting, admission == "reserve",
        whole_device=size is None, edge=edge, header_timeout_s=header_timeout,
        shutdown_timeout_s=shutdown_timeout))


# Which Scenario fields each of serve's flags sets; --host, --port and --api-key are the run's.
SERVE_PATHS = {
    "model": ("model.name",), "device": ("runtime.run_on",), "device_memory": ("device.name",),
    "context": ("scheduler.max_model_len",), "block_size": ("scheduler.block_size",),
    "max_num_seqs": ("scheduler.max_num_seqs",),
    "max_num_batched_tokens": ("scheduler.max_num_batched_tokens",),
    "num_kv_blocks": ("memory.num_gpu_blocks_override",), "max_waiting": ("server.max_waiting",),
    "admission": ("runtime.admission",), "weights": ("runtime.weights",),
    "tokenizer": ("server.tokenizer",), "seed": ("runtime.seed",),
    "served_model_name": ("server.served_model_name",),
    "max_request_bytes": ("server.max_request_bytes",),
    "header_timeout": ("server.header_timeout",), "body_timeout": ("server.body_timeout",),
    "shutdown_timeout": ("server.shutdown_timeout",),
}
_SERVER_DEFAULTS = {  # a scenario's null: the server's own default (runtime/server/limits.py)
    "server.max_request_bytes": limits.DEFAULT_MAX_REQUEST_BYTES,
    "server.header_timeout": limits.DEFAULT_HEADER_TIMEOUT_S,
    "server.body_timeout": limits.DEFAULT_BODY_TIMEOUT_S,
    "server.shutdown_timeout": limits.DEFAULT_SHUTDOWN_TIMEOUT_S,
    "scheduler.max_num_seqs": DEFAULT_MAX_NUM_SEQS,
    "scheduler.max_num_batched_tokens": DEFAULT_MAX_NUM_BATCHED_TOKENS,
}


def _server_scenario(scenario: Scenario) -> Scenario:
    """Every value the server runs with spelled out (a null takes the server's default; the
    served name, MODEL as given), so a saved scenario starts the same server again."""
    from servecap.scenario.spec import get

    values = {path: value for path, value in _SERVER_DEFAULTS.items()
              if get(scenario, path) is None}
    if scenario.server.served_model_name is None:
        values["server.served_model_name"] = scenario.model.ref
    return with_values(scenario, values)


# What a scenario may describe that serve does not run: refused by field, never dropped.
_NOT_SERVED = {"parallel.tensor_parallel_size": 1, "parallel.pipeline_parallel_size": 1,
               "parallel.data_parallel_size": 1, "dtypes.weight_dtype": None,
               "dtypes.kv_cache_dtype": None, "speculative.model": None}


def _served_as_described(scenario: Scenario) -> None:
    """serve runs one rank in the checkpoint's dtypes without a draft: a scenario asking for
    more is refused by its field (verify runs tensor-parallel ranks and other dtypes)."""
    from servecap.scenario.spec import get

    for path, served in _NOT_SERVED.items():
        if get(scenario, path) != served:
            raise SpecError(path, get(scenario, path), f"{'null' if served is None else served}"
                            ": serve runs one rank in the checkpoint's dtypes, without a draft "
                            "model (plan, simulate or verify the scenario for the rest)")


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
