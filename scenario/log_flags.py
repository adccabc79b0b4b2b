"""A vLLM log's own deployment as Scenario values: its non-default args read through vLLM's
launch-line table (scenario/vllm_line.py), the figures its lines state, the VLLM_* settings
that change a release's memory rules, and what its custom all-reduce line says of the link."""

import json

from servecap.ledger.devices import NODES, PCIE
from servecap.ledger.errors import SpecError
from servecap.ledger.vllm_batch import BATCHED_TOKENS, SEQS_DEFAULT, SERVE, rule_for
from servecap.ledger.vllm_log import LogFacts
from servecap.ledger.vllm_versions import FLASHINFER, TRITON, VllmRow, parse_version

from .launch_line import read_each
from .lora import LORA_KNOBS
from .spec import DEFAULT, Scenario, get, with_values
from .vllm_line import VLLM

# The model comes from the config reconcile is given; these name the served model only.
NOT_FLAGS = frozenset({"model_tag", "model", "served_model_name", "tokenizer"})
# A release's rules read these settings (vllm/envs.py); others are listed as read, unmodelled.
ENV_READ = frozenset({"VLLM_USE_FLASHINFER_SAMPLER", "VLLM_MXFP4_USE_MARLIN",
                      "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS", "VLLM_USE_V1"})
# --limit-mm-per-prompt naming no modality: vLLM's default limit for each (999), so the plan
# holds the encoder profile a log's 'Encoder cache will be initialized' line shows was run
DEFAULT_PROFILE = "{}"
SMALL_SERVE_TOKENS = BATCHED_TOKENS[(False, SERVE)]  # V1's server default below the big GPUs
ENV_MEMORY = frozenset({"VLLM_MLA_DISABLE", "VLLM_FUSED_MOE_CHUNK_SIZE",
                        "VLLM_CPU_KVCACHE_SPACE", "VLLM_ATTENTION_BACKEND"})


def logged_values(facts: LogFacts) -> tuple[dict[str, object], tuple[str, ...]]:
    """{Scenario path: value} for what the log shows, and notes on what it shows that the
    ledger does not model. The non-default args come first; a figure only a line states
    (tensor_parallel_size=2 in the engine's config line) fills what they leave."""
    # vLLM builds no LoRA config without enable_lora and ignores its knobs (a V0 log's
    # Namespace prints every argument, max_loras=1 among them, whether LoRA is on or not)
    lora_off = not dict(facts.args).get("enable_lora")
    words = [_words(name, value) for name, value in facts.args
             if name not in NOT_FLAGS and not (lora_off and name in LORA_KNOBS)]
    values, _, unmodelled = read_each(VLLM, [w for w in words if w])
    for path, value in _from_lines(facts).items():
        values.setdefault(path, value)
    seqs = _seqs_of_the_small_branch(facts, values)
    if seqs is not None:
        values["scheduler.max_num_seqs"] = seqs
    if facts.allreduce_off in ("no_p2p", "pcie"):
        values["device.interconnect"] = PCIE
    flags = [line.split(' = ', 1)[0] for line in unmodelled]
    notes = [f"the log's flag {flag} is read but not modelled" for flag in flags]
    if facts.args_with_defaults and flags:  # V0's Namespace: mostly defaults, said once
        names = ", ".join(flag.rsplit(" ", 1)[-1] for flag in flags)
        notes = [f"the log's args Namespace lists every argument, defaults among them; "
                 f"{len(flags)} read but not modelled: {names}"]
    dropped = [name for name, value in facts.args
               if lora_off and name in LORA_KNOBS and value not in (None, False)]
    if dropped and not facts.args_with_defaults:  # a Namespace's are defaults: nothing set
        notes.append(f"the log's {', '.join(dropped)} not read: LoRA is off "
                     "(no enable_lora), and vLLM ignores its knobs without it")
    if facts.blocks_override is not None:
        notes.append(f"the log overrides the {facts.num_gpu_blocks:,} blocks its profile gave "
                     f"with num_gpu_blocks_override {facts.blocks_override:,}: the rows compare "
                     "the profile's count, which the release's rules predict; the engine ran "
                     "the override (its token and concurrency lines print that one)")
    if seqs is not None:
        notes.append(f"the log's max_num_batched_tokens={SMALL_SERVE_TOKENS:,} is V1's server "
                     "default for GPUs under the larger defaults (no flag set it), and "
                     f"max_num_seqs comes from the same branch: planned at {seqs:,} "
                     "(vllm/engine/arg_utils.py; ledger/vllm_batch.py)")
    if facts.allreduce_off == NODES:
        values["parallel.nnodes"] = 2
        notes.append("the log says its tensor-parallel group spans nodes: planned as two")
    if facts.allreduce_off in ("no_p2p", "pcie"):
        notes.append("the log says custom all-reduce is off (no GPU P2P, or PCIe only): "
                     "collectives planned as over PCIe")
    notes += [f"the log sets {name}={value}: not modelled" for name, value in facts.env
              if name in ENV_MEMORY]
    if facts.cold_compile:
        values["engine.cold_compile"] = True
        notes.append("the log compiles torch.compile's graphs cold ('Compiling a graph for'): "
                     "planned as --cold-compile: vLLM's profile charges the compile's peak as "
                     "activation (vllm-project/vllm#54122), from 0.11.1 Inductor benchmarking "
                     "the embedding gather on a random copy of the table; a warm restart's "
                     "pool is larger (plan without --cold-compile)")
    if facts.encoder_budget_tokens is not None and \
            not any(path.startswith("multimodal.") for path in values):
        values["multimodal.limit_mm_per_prompt"] = DEFAULT_PROFILE
        notes.append("the log's 'Encoder cache will be initialized' line: vLLM profiled the "
                     "vision encoder with its default limits (999 items a modality), planned "
                     f"as --limit-mm-per-prompt '{DEFAULT_PROFILE}'")
    return values, tuple(notes)


def _seqs_of_the_small_branch(facts: LogFacts, values: dict[str, object]) -> int | None:
    """V1's max_num_seqs where the log shows the server's smaller batch default: vLLM sets
    max_num_batched_tokens and max_num_seqs in one branch (2,048 and 256 below 70 GiB or on
    an A100; 8,192 and 1,024 above), so a 2,048 no flag set says which branch ran, whatever
    the device's size suggests (a GB10 of 119.7 GiB under NVIDIA's 0.13.0 build printed it).
    None where a flag or line gives max_num_seqs, or the log shows otherwise."""
    args = dict(facts.args)
    if facts.engine_version != "v1" or facts.release is None or "max_num_seqs" in args \
            or "max_num_batched_tokens" in args or "scheduler.max_num_seqs" in values \
            or facts.max_num_batched_tokens != SMALL_SERVE_TOKENS:
        return None
    try:
        release = parse_version(facts.release)
    except SpecError:
        return None
    return rule_for(release).seqs_everywhere or SEQS_DEFAULT


def _words(name: str, value: object) -> list[str] | None:
    """A non-default arg as the flag vLLM's command line spells it."""
    flag = "--" + name.replace("_", "-")
    if value is True:
        return [flag]
    if value is False:
        return ["--no-" + flag[2:]]
    if value is None or isinstance(value, list | tuple):
        return None
    text = json.dumps(value) if isinstance(value, dict) else str(value)
    return [flag, text]


def _from_lines(facts: LogFacts) -> dict[str, object]:
    """The figures the log's own lines state (the engine's config line, the API server's)."""
    kv = facts.kv_cache_dtype
    pairs = {"scheduler.max_model_len": facts.max_model_len,
             "scheduler.max_num_batched_tokens": facts.max_num_batched_tokens,
             "scheduler.max_num_seqs": facts.max_num_seqs,
             "parallel.tensor_parallel_size": facts.tensor_parallel_size,
             "memory.gpu_memory_utilization": facts.gpu_memory_utilization,
             "dtypes.kv_cache_dtype": None if kv in (None, "auto") else
             ("fp8" if kv.startswith("fp8") else kv),
             "engine.mxfp4_backend": facts.mxfp4_backend or _env_marlin(facts),
             "engine.sampler": facts.sampler}
    return {path: value for path, value in pairs.items() if value is not None}


def _env_marlin(facts: LogFacts) -> str | None:
    return "marlin" if dict(facts.env).get("VLLM_MXFP4_USE_MARLIN") == "1" else None


def fill(scenario: Scenario, values: dict[str, object]) -> tuple[Scenario, list[str]]:
    """The Scenario with each logged value where the Scenario holds the default; and the
    paths where the Scenario's own value differs from the log's (the Scenario wins)."""
    taken = {p: v for p, v in values.items() if get(scenario, p) == get(DEFAULT, p)}
    differ = [p for p, v in values.items() if p not in taken and get(scenario, p) != v]
    return with_values(scenario, taken), differ


def env_sampler(facts: LogFacts, row: VllmRow) -> str | None:
    """VLLM_USE_FLASHINFER_SAMPLER=1 asks for FlashInfer's sampling; =0 on a release whose
    default is FlashInfer takes its fallback, Triton (vllm/v1/sample/ops/topk_topp_sampler.py);
    a sampler line in the log says what vLLM did and wins."""
    setting = dict(facts.env).get("VLLM_USE_FLASHINFER_SAMPLER")
    if facts.sampler is not None or setting not in ("0", "1"):
        return None
    if setting == "1":
        return FLASHINFER
    return TRITON if row.sampler == FLASHINFER else None


def env_graphs(facts: LogFacts, row: VllmRow) -> bool:
    """Whether the CUDA-graph estimate is taken out of the pool: the release's default
    (VllmRow.graphs_subtracted) unless VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS is set."""
    setting = dict(facts.env).get("VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS")
    if setting in ("0", "1") and row.graphs_logged:
        return setting == "1"
    return row.graphs_subtracted
