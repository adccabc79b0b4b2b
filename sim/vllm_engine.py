"""What a vLLM release adds to each step's time: the host's work per step and per sequence
(overlapping the GPU's where the release schedules asynchronously), CUDA-graph coverage, the
eager launch cost and the API server's cost per request and per token.

Every term is a Coefficients field, printed in `simulate --json` (coefficients, step_terms)
and overridable with --coefficients. The fitted terms (FITTED) come from sim/engine_fit.json,
which `python bench/vllm_latency.py --leave-one-source-out --write` fits on the published runs
of tests/fixtures/vllm_bench, every term on many runs from several sources and validated
leave-one-source-out; the rest are read from vLLM's source at the tag (sim/vllm_releases.py)."""

import json
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from servecap.ledger.serve import DEFAULT_MAX_NUM_SEQS
from servecap.ledger.vllm_versions import VllmRow

from .roofline import Coefficients, override
from .vllm_releases import graph_max as release_graph_max
from .vllm_releases import overlap, scheduling_for

FIT_FILE = Path(__file__).with_name("engine_fit.json")
# vllm/worker/model_runner.py (V0, 0.6.x): _BATCH_SIZES_TO_CAPTURE = [1, 2, 4] +
# [8 * i for i in range(1, 33)]: decode batches up to 256 replay a graph; prefills never do.
V0_GRAPH_MAX = 256
# V1: capture sizes [1, 2, 4] + multiples of 8 up to min(max_num_seqs x 2, 512)
# (sim/vllm_releases.py graph_max); piecewise graphs cover mixed prefill/decode batches.
V1_GRAPH_MAX = 512
# What each fitted term is, for the notes and the fit's report. V1's host terms are the
# engine core's busy loop (schedule(), _prepare_inputs, update_from_output: vLLM's comment in
# vllm/v1/core/sched/scheduler.py calls the per-request loop 'a performance bottleneck');
# V0's loop splits in two: what it does once per scheduling round (schedule(), preparing the
# model's inputs: V0_CPU_PER_SEQ_S, which multi-step scheduling amortises over its K steps, the
# reason vLLM 0.6 added it) and what it does every step (sampler output, detokenization,
# output processing: V0_OUTPUT_PER_SEQ_S).
# The API server's terms are its event loop's: per request (HTTP, rendering, building the
# engine's request), per prompt token (tokenization on its one thread), per streamed output
# token (detokenization and the SSE chunk), which loads the loop and so stretches every
# request's serial share as traffic grows (sim/frontend.py); frontend_latency_s is V1's time
# in transit to the engine core and back, outside that queue.
TERMS = {
    "V0_CPU_PER_SEQ_S": "V0 host time per running sequence per scheduling round",
    "V0_OUTPUT_PER_SEQ_S": "V0 host time per running sequence per step",
    "V1_CPU_STEP_S": "V1 engine-core host time per step",
    "V1_CPU_PER_SEQ_S": "V1 engine-core host time per running sequence per step",
    "EAGER_LAYER_S": "launch cost per layer of a step outside CUDA graphs",
    "FRONTEND_S": "API server's serial time per request",
    "FRONTEND_PROMPT_TOKEN_S": "API server's serial time per prompt token",
    "FRONTEND_OUTPUT_TOKEN_S": "API server's event-loop time per streamed output token",
    "V1_FRONTEND_LATENCY_S": "V1's latency per request outside the API server's queue",
}


def load_fitted(path: Path = FIT_FILE) -> dict[str, float]:
    """The fitted terms (0 for a term the fit dropped or a file without it)."""
    data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    values = data.get("terms", {})
    return {name: float(values.get(name, {}).get("value", 0.0)) for name in TERMS}


FITTED = load_fitted()


@contextmanager
def fitted_values(values: dict[str, float]):
    """FITTED replaced by `values` inside the block (what the fit tries; restored after)."""
    saved = dict(FITTED)
    FITTED.update(values)
    try:
        yield
    finally:
        FITTED.clear()
        FITTED.update(saved)


SOURCES = {
    "v0": "V0 engine loop (vllm/engine/llm_engine.py): scheduling, sampling, detokenization "
          "and output processing run on the host between steps, per sequence; graphs for "
          "decode batches <= 256 (vllm/worker/model_runner.py _BATCH_SIZES_TO_CAPTURE)",
    "v1": "V1 engine core (vllm/v1/engine/core.py): detokenization and streaming run in the "
          "API server process (vllm/v1/engine/output_processor.py), beside the busy loop",
}


@dataclass(frozen=True)
class EngineTerms:
    """The terms one release runs with, as Coefficients fields, and where they come from."""

    cpu_step_s: float
    cpu_per_seq_s: float
    cpu_overlap: float
    eager_layer_s: float
    graph_max_tokens: int
    graph_prefill: float
    frontend_s: float
    frontend_latency_s: float
    frontend_prompt_token_s: float
    frontend_output_token_s: float
    source: str

    def coefficients(self) -> dict:
        """The Coefficients fields these terms set."""
        return {k: getattr(self, k) for k in (
            "cpu_step_s", "cpu_per_seq_s", "cpu_overlap", "eager_layer_s", "graph_max_tokens",
            "graph_prefill", "frontend_s", "frontend_latency_s", "frontend_prompt_token_s",
            "frontend_output_token_s")}


@dataclass(frozen=True)
class Release:
    """What the terms depend on besides the memory row: the release asked for (the row's own
    version when none), --enforce-eager, --async-scheduling / --no-async-scheduling (None:
    the release's default), the device's name and max_num_seqs (CUDA-graph sizes), and
    pipeline parallel and a separate draft model (which turn the default async scheduling
    off where the release does, sim/vllm_releases.py). num_scheduler_steps: V0's
    multi-step groups, over which its per-round host work is spread."""

    version: tuple[int, ...] | None = None
    enforce_eager: bool = False
    num_scheduler_steps: int = 1
    async_scheduling: bool | None = None
    device_label: str = ""
    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS
    pipeline_parallel_size: int = 1
    draft_model: bool = False


def engine_terms(row: VllmRow, enforce_eager: bool = False,
                 async_scheduling: bool | None = None, release: Release | None = None
                 ) -> EngineTerms:
    """The row's terms. --enforce-eager: every step outside graphs. V1 releases overlap the
    host's work with the GPU's (the step takes the larger of the two) where async scheduling
    is on: by default from v0.14.0, or with --async-scheduling (sim/vllm_releases.py)."""
    rel = replace(release or Release(), enforce_eager=enforce_eager,
                  async_scheduling=async_scheduling)
    return _v0_terms(row, rel) if row.formula == "v0" else _v1_terms(row, rel)


def _api(notes: list[str], latency: float) -> dict:
    f = FITTED
    notes.append(f"API server {f['FRONTEND_S'] * 1e3:.3g} ms/request + "
                 f"{f['FRONTEND_PROMPT_TOKEN_S'] * 1e6:.3g} us/prompt token serial, "
                 f"{f['FRONTEND_OUTPUT_TOKEN_S'] * 1e6:.3g} us/streamed token of event-loop "
                 f"load, {latency * 1e3:.3g} ms latency (fitted, sim/engine_fit.json)")
    return {"frontend_s": f["FRONTEND_S"], "frontend_latency_s": latency,
            "frontend_prompt_token_s": f["FRONTEND_PROMPT_TOKEN_S"],
            "frontend_output_token_s": f["FRONTEND_OUTPUT_TOKEN_S"]}


def _v0_terms(row: VllmRow, rel: Release) -> EngineTerms:
    """cpu_per_seq_s = V0_CPU_PER_SEQ_S / K + V0_OUTPUT_PER_SEQ_S for K scheduler steps."""
    f = FITTED
    k = max(1, rel.num_scheduler_steps)
    per_seq = f["V0_CPU_PER_SEQ_S"] / k + f["V0_OUTPUT_PER_SEQ_S"]
    notes = [f"{row.tag}: {SOURCES['v0']}",
             f"host {f['V0_CPU_PER_SEQ_S'] * 1e6:.3g} us/sequence per scheduling round (over "
             f"{k} step{'s' if k > 1 else ''}) + {f['V0_OUTPUT_PER_SEQ_S'] * 1e6:.3g} "
             f"us/sequence per step, eager {f['EAGER_LAYER_S'] * 1e6:.3g} us/layer (fitted, "
             "sim/engine_fit.json); host and GPU do not overlap (V0 has no async scheduling)"]
    if rel.enforce_eager:
        notes.append("--enforce-eager: no CUDA graphs")
    api = _api(notes, 0.0)
    return EngineTerms(0.0, per_seq, 0.0, f["EAGER_LAYER_S"],
                       0 if rel.enforce_eager else V0_GRAPH_MAX, 0.0, api["frontend_s"],
                       0.0, api["frontend_prompt_token_s"], api["frontend_output_token_s"],
                       "; ".join(notes))


def _v1_terms(row: VllmRow, rel: Release) -> EngineTerms:
    f = FITTED
    sched = scheduling_for(rel.version or row.version) or scheduling_for(row.version)
    ov = overlap(sched, rel.async_scheduling, rel.pipeline_parallel_size,
                 rel.draft_model)
    graphs = 0 if rel.enforce_eager else release_graph_max(sched, rel.device_label,
                                                           rel.max_num_seqs)
    # V1 compiles the model (torch.compile); a step above the captured sizes runs the
    # compiled kernels without a graph, whose launch cost no fixture measures: only
    # --enforce-eager (no compile, no graphs) pays the eager cost there
    eager = f["EAGER_LAYER_S"] if rel.enforce_eager else 0.0
    notes = [f"{row.tag}: {SOURCES['v1']}",
             f"scheduling as {sched.tag}: {sched.cudagraph_mode} CUDA graphs up to "
             f"{graphs} tokens; host and GPU {'overlap' if ov.overlap else 'do not overlap'}"
             f": {ov.why}",
             f"host {f['V1_CPU_STEP_S'] * 1e3:.3g} ms/step + {f['V1_CPU_PER_SEQ_S'] * 1e6:.3g} "
             "us/sequence (fitted, sim/engine_fit.json)"]
    if rel.enforce_eager:
        notes.append(f"--enforce-eager: no CUDA graphs, {eager * 1e6:.3g} us/layer")
    api = _api(notes, f["V1_FRONTEND_LATENCY_S"])
    return EngineTerms(f["V1_CPU_STEP_S"], f["V1_CPU_PER_SEQ_S"], 1.0 if ov.overlap else 0.0,
                       eager, graphs, 1.0, api["frontend_s"], api["frontend_latency_s"],
                       api["frontend_prompt_token_s"], api["frontend_output_token_s"],
                       "; ".join(notes))


def with_release(coef: Coefficients, row: VllmRow, enforce_eager: bool = False,
                 async_scheduling: bool | None = None, release: Release | None = None
                 ) -> Coefficients:
    """coef with the row's terms on top, its source naming the release and each term's own
    (what simulate and search both price a release's steps with)."""
    terms = engine_terms(row, enforce_eager, async_scheduling, release)
    return override(coef, terms.coefficients(), f"{coef.source}; engine {row.pin}: "
                    f"{terms.source}")
