"""`servecap verify`: run the plan on a device (or an emulated one) and reconcile every line."""

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from servecap.ledger.errors import SpecError
from servecap.ledger.serve import (
    DEFAULT_BLOCK_SIZE_TOKENS,
    DEFAULT_MAX_NUM_BATCHED_TOKENS,
    DEFAULT_MAX_NUM_SEQS,
    DEFAULT_SAFETY_FRACTION,
)
from servecap.scenario import verification
from servecap.scenario.spec import Scenario, with_values
from servecap.scenario.verification import PHASES

from .errors import EXIT_DOES_NOT_FIT, fail, handle_errors
from .extras import RUNTIME, need
from .files import check_output_files, write_csv, write_json
from .inputs import PlanFlags, plan_scenario
from .option_groups import options_from
from .plan_view import over_ceiling
from .scenario_opts import SaveScenario, ScenarioFile, merged, save
from .verify_json import verify_to_dict
from .verify_progress import phase_bars, wanted
from .verify_view import render_verify, violation_summary
from .verify_xlsx import write_failed_workbook, write_verified_workbook
from .workbook_scenario import Recording

Opt = typer.Option


@dataclass(frozen=True)
class VerifyFlags:
    device: str = "cpu"
    device_memory: str | None = None
    num_layers: int | None = None
    output_tokens: int = 16
    seed: int = 0
    weights: str | None = None
    workload: Path | None = None
    realtime: bool | None = None
    admission: str = "reserve"
    tensor_parallel_size: int = 1
    trace: Path | None = None
    probe: bool = True
    starve: tuple[int, str] | None = None
    verbose: bool = False


@dataclass(frozen=True)
class VerifyOptions:
    """What verify runs and how: the plan's inputs, where it runs, the load and its seed."""

    device: Annotated[str, Opt(help="cpu, cuda or cuda:N.")] = "cpu"
    device_memory: Annotated[str | None, Opt(help="Emulate a device of this size (40GiB): "
                                             "CUDA by the per-process memory fraction, CPU as "
                                             "a cap the runtime enforces. Default: the model "
                                             "file's device, else the whole GPU.")] = None
    context: Annotated[int | None, Opt("--context", "--max-model-len",
                                       help="Tokens per request. Default: the model file's "
                                       "serving.context, else its "
                                       "max_position_embeddings.")] = None
    concurrency: Annotated[int | None, Opt(help="Requests in the declared load. Default: the "
                                           "model file's serving.concurrency, else 1.")] = None
    runtime_peak: Annotated[str | None, Opt(help="Declared runtime peak budget, e.g. "
                                            "3GiB. Default: the model file's, else the "
                                            "ledger's estimate.")] = None
    safety: Annotated[str | None, Opt(help="Safety reserve: a size or a share (10%). Default: "
                                      "the model file's, else "
                                      f"{DEFAULT_SAFETY_FRACTION:.0%}.")] = None
    weight_dtype: Annotated[str | None, Opt(help="fp32, bf16, fp16. Default: the "
                                            "checkpoint's.")] = None
    kv_dtype: Annotated[str | None, Opt("--kv-dtype", "--kv-cache-dtype", help="KV cache "
                                        "dtype: fp32, bf16, fp16, fp8 (e4m3, scale 1.0 as "
                                        "vLLM's --kv-cache-dtype fp8). Default: the model "
                                        "dtype.")] = None
    block_size: Annotated[int | None, Opt(help="Paged KV block size in tokens. Default: the "
                                          "model file's, else "
                                          f"{DEFAULT_BLOCK_SIZE_TOKENS}.")] = None
    max_num_batched_tokens: Annotated[int, Opt(help="Tokens per forward pass.")] = (
        DEFAULT_MAX_NUM_BATCHED_TOKENS)
    max_num_seqs: Annotated[int, Opt(help="Most sequences in one step.")] = DEFAULT_MAX_NUM_SEQS
    num_layers: Annotated[int | None, Opt(help="Run a copy with only the first N layers; the "
                                          "ledger is scaled the same way.")] = None
    output_tokens: Annotated[int, Opt(help="Output tokens of each request in the declared "
                                      "load (prompt = context - output).")] = 16
    seed: Annotated[int, Opt(help="Seed for weights and prompts.")] = 0
    weights: Annotated[str | None, Opt(help="Local safetensors directory (default: seeded "
                                       "random weights); a Hub model's: hf download it "
                                       "first.")] = None
    workload: Annotated[Path | None, Opt(help="The simulator's workload YAML as the load "
                                         "(default: concurrency requests of the "
                                         "context).")] = None
    trace: Annotated[Path | None, Opt(help="CSV trace (arrival_s,prompt_tokens,output_tokens, "
                                      "as simulate reads) to replay as the load.")] = None
    realtime: Annotated[bool | None, Opt("--realtime/--no-realtime", help="Add each request "
                                         "at its arrival time (default with --trace or "
                                         "--workload); --no-realtime: all at once.")] = None
    admission: Annotated[str, Opt(help="reserve: admit only when blocks for the whole "
                                  "context are free (never preempts); optimistic: admit on the "
                                  "prompt's blocks, preempt by recompute when decode growth "
                                  "runs out (vLLM).")] = "reserve"
    tensor_parallel_size: Annotated[int, Opt("--tensor-parallel-size", "-tp", "--tp",
                                             help="Ranks, one process each (gloo on the CPU, "
                                             "NCCL on CUDA: rank r on cuda:r); each reconciles "
                                             "its own shard.")] = 1
    probe: Annotated[bool, Opt("--probe/--no-probe", help="Run the ceiling probe after the "
                               "load (--no-probe: the ceiling is not measured).")] = True


@options_from(VerifyOptions, "opts", after="model")
def verify(
    ctx: typer.Context,
    model: Annotated[str | None, typer.Argument(
        help="Bundled model name, a model YAML, a config.json, a local model directory or a "
        "Hub id org/name; may come from --scenario instead.", show_default=False)] = None,
    as_json: Annotated[bool, Opt("--json", help="Print one JSON object (integer bytes).")]
    = False,
    xlsx: Annotated[Path | None, Opt(help="Also write the capacity workbook with its "
                                     "Verification sheet filled.")] = None,
    force: Annotated[bool, Opt(help="Replace existing output files (--xlsx, --records, "
                               "--token-times, --calibration-out).")] = False,
    calibration_out: Annotated[Path | None, Opt(help="Write the simulator's step-model fit "
                                                "of this run's steps (JSON the simulator's "
                                                "--coefficients takes).")] = None,
    records_path: Annotated[Path | None, Opt("--records", help="Write one CSV row per request "
                                             "of the load (simulate's --records columns).")]
    = None,
    token_times_path: Annotated[Path | None, Opt("--token-times", help="Write one CSV row per "
                                                 "generated token (simulate's --token-times "
                                                 "columns).")] = None,
    verbose: Annotated[bool, Opt("--verbose", "-v", help="Say what was read from the Hugging "
                                 "Face Hub: each file, its bytes, network or cache (stderr).")]
    = False,
    scenario_file: ScenarioFile = None,
    save_scenario: SaveScenario = None,
    opts: VerifyOptions = None,
    inject_oom: Annotated[str | None, Opt(hidden=True, help="RANK:PHASE (e.g. 1:warmup), "
                                          "--device cpu only: that rank's emulated device has "
                                          "no room for transients in that phase, to check the "
                                          "failure path.")] = None,
) -> None:
    """Measure the plan on the device, line by line; exit 1 when a ledger line is violated.

    Runs the paged-KV runtime under the declared load and reconciles every ledger line
    (docs/verify.md). Examples:

      servecap verify tiny-llama --device cpu          # a 16 MiB device emulated on the CPU
      servecap verify llama-3.1-8b --device cuda:0 --context 4096 --concurrency 16
      servecap verify tiny-llama --device cpu --json --calibration-out coeffs.json
      servecap verify tiny-llama --trace workloads/trace.csv --concurrency 8 --records runs.csv
    """
    need("verify", RUNTIME)
    o = opts
    flags = PlanFlags(o.device_memory, o.context, o.concurrency, None, o.runtime_peak, o.safety,
                      o.weight_dtype, o.kv_dtype, None, o.block_size, 0, 128,
                      o.max_num_batched_tokens, o.max_num_seqs)
    vflags = VerifyFlags(o.device, o.device_memory, o.num_layers, o.output_tokens, o.seed,
                         o.weights, o.workload, o.realtime, o.admission,
                         o.tensor_parallel_size, o.trace, o.probe, _injected(inject_oom),
                         verbose)
    origins: dict[str, str] = {}
    scenario = merged(ctx, verify_scenario(model, flags, vflags), VERIFY_PATHS, scenario_file,
                      verbose, origins=origins)
    outputs = {"--xlsx": xlsx, "--records": records_path, "--token-times": token_times_path,
               "--calibration-out": calibration_out}
    w = scenario.workload
    if xlsx is not None:
        from servecap.workbooks.filename import check_workbook_name

        check_workbook_name(xlsx)
    check_output_files(outputs, tuple(None if p is None else Path(p) for p in (w.file, w.trace)),
                       force)
    with phase_bars(wanted(as_json)) as progress:
        result = verification.verify(scenario, progress, vflags.starve,
                                     lambda loaded: hub_weights(loaded.hub, scenario, verbose))
    save(scenario, save_scenario)
    model = scenario.model.ref
    report = verify_to_dict(result)
    recording = Recording(scenario, origins)
    if xlsx is not None and result.ranks:
        write_verified_workbook(model, result.binding, report["lines"], xlsx, force, recording)
    elif xlsx is not None and result.spec is not None:
        write_failed_workbook(model, result, report["lines"], xlsx, force, recording)
    if result.ranks:
        write_outputs(result.binding, calibration_out, records_path, token_times_path)
    print(json.dumps(report, indent=2)) if as_json else render_verify(result, Console())
    summary = violation_summary(result)
    if summary:  # said once, here: the table view leaves it to this line
        over = over_ceiling(result.binding.plan) if result.ranks else ""
        raise fail("violated: " + summary + (f"; {over}" if over else ""),
                   EXIT_DOES_NOT_FIT)


def write_outputs(result, calibration_out: Path | None, records_path: Path | None,
                  token_times_path: Path | None) -> None:
    """The simulator's step-model fit (as simulate --coefficients takes it; the replayed step
    times and every step sample are in --json's `calibration`) and the simulator's CSVs."""
    if calibration_out is not None:
        from servecap.runtime.calibration import calibration_file

        write_json(calibration_out, calibration_file(result.calibration), force=True)
    if records_path is None and token_times_path is None:
        return
    from servecap.runtime.latency import as_seq
    from servecap.sim.records import RECORD_COLUMNS, TOKEN_COLUMNS, records, token_rows

    seqs = [as_seq(r) for r in result.records]
    if records_path is not None:
        write_csv(records_path, RECORD_COLUMNS, records("verify", "", seqs), "--records")
    if token_times_path is not None:
        write_csv(token_times_path, TOKEN_COLUMNS, token_rows("verify", "", [], seqs),
                  "--token-times")


# Which Scenario fields each of verify's flags sets.
VERIFY_PATHS = {
    "model": ("model.name",), "device": ("runtime.run_on",),
    "device_memory": ("device.name",), "context": ("scheduler.max_model_len",),
    "concurrency": ("load.concurrency",), "runtime_peak": ("memory.runtime_peak",),
    "safety": ("memory.safety",), "weight_dtype": ("dtypes.weight_dtype",),
    "kv_dtype": ("dtypes.kv_cache_dtype",), "block_size": ("scheduler.block_size",),
    "max_num_batched_tokens": ("scheduler.max_num_batched_tokens",),
    "max_num_seqs": ("scheduler.max_num_seqs",), "num_layers": ("runtime.num_layers",),
    "output_tokens": ("runtime.output_tokens",), "seed": ("runtime.seed",),
    "weights": ("runtime.weights",), "workload": ("workload.file",),
    "trace": ("workload.trace",), "realtime": ("runtime.realtime",),
    "admission": ("runtime.admission",),
    "tensor_parallel_size": ("parallel.tensor_parallel_size",), "probe": ("runtime.probe",),
}


def verify_scenario(model: str | None, flags: PlanFlags, vflags: VerifyFlags) -> Scenario:
    """The Scenario verify's flags describe: plan's, with where and how the runtime runs."""
    def text(path):
        return None if path is None else str(path)
    base = plan_scenario(model, flags)
    return with_values(base, {
        "scheduler.max_num_seqs": flags.max_num_seqs,
        "runtime.run_on": vflags.device, "runtime.num_layers": vflags.num_layers,
        "runtime.output_tokens": vflags.output_tokens, "runtime.seed": vflags.seed,
        "runtime.weights": vflags.weights, "runtime.realtime": vflags.realtime,
        "runtime.admission": vflags.admission, "runtime.probe": vflags.probe,
        "workload.file": text(vflags.workload), "workload.trace": text(vflags.trace),
        "parallel.tensor_parallel_size": vflags.tensor_parallel_size})


def verify_from_flags(model: str, flags: PlanFlags, vflags: VerifyFlags, progress=None):
    """Run and reconcile the Scenario these flags describe (scenario/verification.py)."""
    scenario = verify_scenario(model, flags, vflags)
    return verification.verify(scenario, progress, vflags.starve,
                               lambda loaded: hub_weights(loaded.hub, scenario,
                                                          vflags.verbose))


def _injected(text: str | None) -> tuple[int, str] | None:
    if text is None:
        return None
    rank, _, phase = text.partition(":")
    if not rank.isdigit() or phase not in PHASES:
        raise SpecError("--inject-oom", text, f"RANK:PHASE with PHASE one of {', '.join(PHASES)}")
    return int(rank), phase


def hub_weights(hub, scenario: Scenario, verbose: bool) -> None:
    """verify runs weights from disk only: a Hub id as --weights is refused with the download
    command; a Hub model run without --weights gets a note that its weights are seeded random."""
    from servecap.model_configs.hub import is_hub_id

    from .plan_cmd import print_fetch_report

    if verbose:
        print_fetch_report(hub)
    ref = scenario.runtime.weights
    if ref is not None and is_hub_id(ref) and not Path(ref).expanduser().exists():
        raise SpecError("--weights", ref, "verify needs the weights on disk, not a Hub id: "
                        f"{download_command(*ref.partition('@')[::2])}, then --weights "
                        f"{_local_dir(ref)}")
    if ref is None and hub is not None:
        print(f"note: {hub.repo_id}: no weights on disk, so verify runs seeded random weights "
              "of its architecture; for the checkpoint's own, "
              f"{download_command(hub.repo_id, hub.sha)}, then --weights "
              f"{_local_dir(hub.repo_id)}", file=sys.stderr)


def download_command(repo_id: str, revision: str = "") -> str:
    """The huggingface_hub CLI line that puts a repo's files in a local folder."""
    rev = f" --revision {revision}" if revision else ""
    return f"hf download {repo_id}{rev} --local-dir {_local_dir(repo_id)}"


def _local_dir(ref: str) -> str:
    return ref.partition("@")[0].rsplit("/", 1)[-1]


def register(app: typer.Typer) -> None:
    app.command()(handle_errors(verify))
