"""`servecap plan`: the per-device memory ledger and the memory-only concurrency ceiling."""

import functools
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated

import typer

from servecap.ledger.engines import DEFAULT_BLOCK_TOKENS, SGLANG, TRTLLM
from servecap.ledger.errors import SpecError
from servecap.ledger.lora import LoraSpec
from servecap.ledger.serve import (
    DEFAULT_BLOCK_SIZE_TOKENS,
    DEFAULT_MAX_NUM_BATCHED_TOKENS,
    DEFAULT_SAFETY_FRACTION,
)
from servecap.model_configs import LoadedModel
from servecap.scenario.deployment import deployment, load
from servecap.scenario.deployment import plan as scenario_plan
from servecap.scenario.serving import model_spec

from .deploy import NO_DEPLOY, DeployFlags, deploy_options
from .errors import EXIT_DOES_NOT_FIT, handle_errors
from .inputs import (  # noqa: F401 (deployment_from_flags, plan_parts: re-exported)
    PLAN_PATHS,
    PlanFlags,
    deployment_from_flags,
    plan_flags_of,
    plan_parts,
    plan_scenario,
)
from .option_groups import options_from
from .plan_json import checkpoint_to_dict, deployment_to_dict, layers_to_dict, source_to_dict
from .scenario_opts import (
    DEVICE_REQUIRED,
    LaunchLineArg,
    SaveScenario,
    ScenarioFile,
    launch_line,
    merged,
    save,
)

Opt = typer.Option
Dev = functools.partial(Opt, rich_help_panel="Device and load")
Led = functools.partial(Opt, rich_help_panel="Ledger lines")
Rep = functools.partial(Opt, rich_help_panel="Representations (dtypes)")
Out = functools.partial(Opt, rich_help_panel="Output")
Lor = functools.partial(Opt, rich_help_panel="LoRA adapters (vLLM's flags)")
Mmo = functools.partial(Opt, rich_help_panel="Multimodal encoder (vLLM's flags)")


@dataclass(frozen=True)
class PlanOptions:
    """plan's own options (fit reads the same), each in its help panel; PlanFlags' names."""

    device: Annotated[str | None, Dev(help="Catalog name (h100-80gb) or size: 40GiB, 80GB, "
                                      "bytes. " + DEVICE_REQUIRED)] = None
    context: Annotated[int | None, Dev("--context", "--max-model-len",
                                       help="Tokens per request (prompt + output). Default: "
                                       "the model's max_position_embeddings.")] = None
    concurrency: Annotated[int | None, Dev(help="Resident requests. Default 1.")] = None
    lengths: Annotated[str | None, Dev(help="Mixed batch of live lengths, e.g. 17,33,65 "
                                       "(instead of context x concurrency).")] = None
    runtime_peak: Annotated[str | None, Led(help="Measured runtime peak (activations, "
                                            "workspaces), e.g. 3GiB. Default: an estimate, "
                                            "labelled.")] = None
    safety: Annotated[str | None, Led(help="Safety reserve: a size (4GiB) or a share of the "
                                      f"device (10%). Default {DEFAULT_SAFETY_FRACTION:.0%}; "
                                      "an --engine keeps its own headroom.")] = None
    weight_dtype: Annotated[str | None, Rep(help="bf16, fp16, fp8, int8, int4, fp4. Default: "
                                            "the checkpoint's.")] = None
    kv_dtype: Annotated[str | None, Rep("--kv-dtype", "--kv-cache-dtype", help="KV cache "
                                        "dtype: bf16, fp16, fp8, int8, int4. Default: the "
                                        "model dtype (vLLM's auto).")] = None
    activation_dtype: Annotated[str | None, Rep(help="bf16, fp16, fp8, int8. Default: the "
                                                "model dtype.")] = None
    block_size: Annotated[int | None, Dev(help="Paged KV block size in tokens. Default "
                                          f"{DEFAULT_BLOCK_SIZE_TOKENS} (vLLM's); --engine "
                                          f"sglang {DEFAULT_BLOCK_TOKENS[SGLANG]}, trtllm "
                                          f"{DEFAULT_BLOCK_TOKENS[TRTLLM]}.")] = None
    shared_prefix: Annotated[int, Dev(help="Tokens of prompt prefix shared by every request "
                                      "(full blocks stored once).")] = 0
    group_size: Annotated[int, Rep(help="int4 group size (0: per channel).")] = 128
    max_num_batched_tokens: Annotated[int | None, Led(help="Tokens per forward pass (sizes the "
                                                      "runtime-peak estimate). Default "
                                                      f"{DEFAULT_MAX_NUM_BATCHED_TOKENS}; "
                                                      "--engine vllm: the release's default "
                                                      "for this GPU.")] = None
    enable_lora: Annotated[bool, Lor("--enable-lora", help="Hold LoRA adapter slots on every "
                                     "rank, as vLLM allocates them.")] = False
    max_loras: Annotated[int | None, Lor(help="Adapters in one batch: the slots. Default "
                                         f"{LoraSpec().max_loras}.")] = None
    max_lora_rank: Annotated[int | None, Lor(help="Rank every slot is sized at (adapters are "
                                             f"padded to it). Default "
                                             f"{LoraSpec().max_lora_rank}.")] = None
    max_cpu_loras: Annotated[int | None, Lor(help="Adapters each rank keeps in host memory. "
                                             "Default: --max-loras.")] = None
    lora_target_modules: Annotated[str | None, Lor(help="Only these modules hold slots, e.g. "
                                                   "o_proj,qkv_proj (vLLM >= 0.19).")] = None
    fully_sharded_loras: Annotated[bool, Lor("--fully-sharded-loras", help="Split the rank "
                                             "of column layers across tensor-parallel "
                                             "ranks.")] = False
    lora_dtype: Annotated[str | None, Lor(help="auto, float16 or bfloat16. Default: the model "
                                          "dtype.")] = None
    limit_mm_per_prompt: Annotated[str | None, Mmo(help='Items a prompt may carry: \'{"image": '
                                                   '2, "video": 0}\' or image=2,video=0 (a '
                                                   'modality not named: 999). Plans the '
                                                   'encoder cache lines.')] = None
    mm_processor_kwargs: Annotated[str | None, Mmo(help='Processor overrides as JSON, e.g. '
                                                   '\'{"max_pixels": 1003520}\' (Qwen-VL), '
                                                   '\'{"do_pan_and_scan": true}\' '
                                                   '(Gemma-3).')] = None
    mm_encoder_tp_mode: Annotated[str | None, Mmo(help="weights (default): the tower split "
                                                  "over tp; data: each rank encodes its share "
                                                  "of the items.")] = None
    skip_mm_profiling: Annotated[bool, Mmo("--skip-mm-profiling", help="vLLM reserves no "
                                           "encoder memory: the lines are 0, a note says "
                                           "what images need.")] = False
    image_size: Annotated[str | None, Mmo(help="The load's images, WxH, comma-separated "
                                          "(e.g. 1024x1024,640x480): tokens each, and how "
                                          "many the budget holds.")] = None


@deploy_options
@options_from(PlanOptions, "opts", after="model")
def plan(
    ctx: typer.Context,
    model: Annotated[str | None, typer.Argument(help="Bundled model name (servecap models), a "
                                                "model YAML, a config.json, a local model "
                                                "directory or a Hugging Face Hub id "
                                                "org/name[@revision].")] = None,
    as_json: Annotated[bool, Out("--json", help="Print one JSON object (integer bytes).")]
    = False,
    xlsx: Annotated[Path | None, Out(help="Also write a capacity workbook with live formulas "
                                     "(needs the excel extra).")] = None,
    force: Annotated[bool, Out("--force", help="Replace an existing --xlsx file.")] = False,
    from_workbook: Annotated[Path | None, Out(help="Plan again from a servecap workbook "
                                              "(instead of MODEL and flags): the scenario it "
                                              "records, each Inputs cell edited since winning "
                                              "(-v says which).")] = None,
    verbose: Annotated[bool, Out("--verbose", "-v", help="Say what was read from the Hugging "
                                 "Face Hub (each file, its bytes, network or cache) and which "
                                 "config.json fields were ignored as irrelevant to memory "
                                 "(stderr).")]
    = False,
    scenario_file: ScenarioFile = None,
    save_scenario: SaveScenario = None,
    launch: LaunchLineArg = None,
    opts: PlanOptions = None,
    deploy: DeployFlags = NO_DEPLOY,
) -> None:
    """Build the per-device memory ledger and the memory-only concurrency ceiling.

    Every line is integer bytes, shown in GiB (2^30 bytes); the "from" column says which inputs
    made it and marks estimates and measured values. Examples:

      servecap plan teaching-7b                # the worked 7B case: 39 requests
      servecap plan llama-3.1-8b --device 40GiB --context 4096 --concurrency 16
      servecap plan teaching-7b --device 80GiB --safety 10% --runtime-peak 0   # 117 requests
      servecap plan ./model-dir --device h100-80gb --kv-dtype fp8 --json
      servecap plan llama-3.1-70b-instruct --device h100-80gb -tp 4 --engine vllm
      servecap plan Qwen/Qwen3-32B --device h100-80gb -v   # Hub id: reads only headers
      servecap plan --device h100-80gb -- vllm serve ./model-dir -tp 2 --max-model-len 8k
      servecap plan --device h100-80gb -- sglang serve ./model-dir --tp 2 --mem-fraction-static 0.85
      servecap plan --device h100-80gb -- trtllm-serve ./model-dir --tp_size 2
      servecap plan --scenario chat.yaml --context 4096 -v   # a saved scenario, one flag over

    Exit 0 when the declared load fits, 1 when it does not, 2 for bad input.
    """
    flags = PlanFlags(**asdict(opts))
    line = launch_line(model, launch)
    if from_workbook is not None and (scenario_file is not None or line):
        raise SpecError("--from-workbook", str(from_workbook), "give one of --from-workbook, "
                        "--scenario and a launch line (--scenario takes a workbook too)")
    origins: dict[str, str] = {}
    scenario = merged(ctx, plan_scenario(None if line else model, flags, deploy), PLAN_PATHS,
                      scenario_file, verbose, line, origins)
    if from_workbook is not None or xlsx is not None:
        from .workbook_cmd import plan_workbook_io  # openpyxl only when a workbook is involved
        from .workbook_scenario import Recording

        scenario = plan_workbook_io(Recording(scenario, origins), from_workbook, xlsx, force,
                                    verbose)
    outcome = scenario_plan(scenario)
    save(scenario, save_scenario, outcome.deployment.plan)
    result, advice = outcome.deployment, outcome.advice
    if verbose:
        print_fetch_report(outcome.loaded.hub)
        print_ignored_fields(outcome.loaded)
    if as_json:
        extra = {"starts": advice is None, "start_advice": advice and {
            "max_model_len": advice.max_model_len,
            "gpu_memory_utilization": advice.gpu_memory_utilization,
            "max_num_seqs": advice.max_num_seqs, "text": advice.text}}
        print(json.dumps({**deployment_to_dict(result), **extra,
                          **source_to_dict(outcome.loaded),
                          **checkpoint_to_dict(outcome.checkpoint),
                          **layers_to_dict(outcome.loaded, result)}, indent=2))
    else:
        _render(result, outcome.checkpoint)
        if advice is not None:  # 'vLLM would refuse to start: ...', wrapped at the terminal
            from rich.console import Console

            Console().print(advice.text, highlight=False, markup=False)
    if not result.fits:
        raise typer.Exit(EXIT_DOES_NOT_FIT)


def print_fetch_report(hub) -> None:
    """-v of plan, simulate and verify: what was read from the Hub, on stderr (nothing for a
    bundled model or a local directory)."""
    if hub is not None:
        from servecap.model_configs.hub import fetch_report

        print("\n".join(fetch_report(hub)), file=sys.stderr)


def print_ignored_fields(loaded) -> None:
    """-v: the config.json fields no ledger line reads (router settings, time_step_limit, the
    vision tower ...), on stderr, so a reviewer sees what was left out and why."""
    if loaded.ignored_fields:
        print(f"ignored as irrelevant to memory ({len(loaded.ignored_fields)}): "
              + ", ".join(loaded.ignored_fields), file=sys.stderr)


def _render(result, checkpoint=None) -> None:
    """rich is loaded only to draw the table: --json never needs it."""
    from rich.console import Console

    from .checkpoint_view import render_checkpoint
    from .deploy_view import render_deployment

    console = Console()
    render_deployment(result, console)
    render_checkpoint(checkpoint, console)


def plan_from_flags(model: str | None, flags: PlanFlags):
    """Load, build the ServeSpec, apply file-derived weights, and plan: the binding rank's."""
    return deployment_from_flags(model, flags).plan


def deployment_parts(model: str, flags: PlanFlags, deploy: DeployFlags):
    """The model as flagged, its deployment with one resident request (what the simulator
    sizes its KV pool and prices its steps from: the same ledger plan prints) and where a Hub
    model was read from (None otherwise)."""
    scenario = plan_scenario(model, flags, deploy)
    loaded = load(scenario)
    return (model_spec(scenario, loaded), deployment(scenario, loaded, concurrency=1),
            loaded.hub)


def _load(model: str | None) -> LoadedModel:
    """The model as the plan's MODEL argument names it (fit reads it once for its search)."""
    return load(plan_scenario(model, PlanFlags()))


def register(app: typer.Typer) -> None:
    app.command()(handle_errors(plan))
