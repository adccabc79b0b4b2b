"""What a vLLM release adds to each step's time: the host's work per step and per sequence,
CUDA-graph coverage and async scheduling, from the release's row of ledger/vllm_versions.py.

Every term is a Coefficients field, printed in `simulate --json` (coefficients, step_terms)
and overridable with --coefficients. The host's per-sequence cost (V0 and V1), V1's host
cost per step, the eager cost per layer, the API server's serial time per request and V1's
front-end latency per request are fitted, each on one named published run
(tests/fixtures/vllm_bench), by `python bench/vllm_latency.py --fit`; the rest are read from
vLLM's source at the tag."""

from dataclasses import dataclass

from servecap.ledger.vllm_versions import VllmRow

from .roofline import Coefficients, override

# vllm/worker/model_runner.py (V0, 0.6.x): _BATCH_SIZES_TO_CAPTURE = [1, 2, 4] +
# [8 * i for i in range(1, 33)]: decode batches up to 256 replay a graph; prefills never do.
V0_GRAPH_MAX = 256
# vllm/config.py CompilationConfig (V1): capture sizes [1, 2, 4] + multiples of 8 up to 512
# (max_num_seqs x 2, at most 512); piecewise graphs cover mixed prefill/decode batches.
V1_GRAPH_MAX = 512
# Fitted by bench/vllm_latency.py --fit: the host's time per running sequence per V0 step
# (sampling, detokenization and output processing in the engine loop) on the sglang
# a100-8b-inf run (vLLM 0.6.0, 5,000 ShareGPT prompts at once: 4,132.37 output tok/s).
V0_CPU_PER_SEQ_S = 8.94e-05
# Fitted likewise: V1's host time per step (scheduling and input preparation in the engine
# core's busy loop, not overlapped without --async-scheduling), on the kvcached
# h100-qwen3-06b-rps16 run (vLLM 0.19.0, Qwen3-0.6B on an H100 at 16 req/s: median TPOT
# 2.40 ms, where the GPU's share is about 1 ms). V0's is inside cpu_per_seq_s's fit.
V1_CPU_STEP_S = 0.00129
# Fitted likewise: V1's host time per running sequence per step in the engine core's busy
# loop, outside the GPU's time: schedule() walks the running queue and builds each request's
# cached data (_make_cached_request_data, _update_after_schedule), the model runner's
# _prepare_inputs gathers each request's block table and positions, and update_from_output
# appends each sampled token and checks its stop conditions ("can be a performance
# bottleneck", vllm/v1/core/sched/scheduler.py @ 00024d314514900f361ad072af6931e403b7f589).
# vLLM PR #46112 times update_from_output alone at 0.142 ms for 128 decodes and 0.287 ms
# for 256 (1.1 us per request), a part of this. Fitted on the kvcached h100-qwen3-06b-inf
# run (vLLM 0.19.0, Qwen3-0.6B on an H100, 500 prompts at once) by its median ITL, 4.51 ms:
# the median gap between two tokens is one step, at the largest batch of the V1 runs kept
# (the median TPOT, 5.71 ms, also averages in the long gaps of steps with prefill chunks).
V1_CPU_PER_SEQ_S = 1.34e-05
# Fitted likewise: the launch cost per layer of a step outside CUDA graphs, on the
# issue #20469 run (vLLM 0.9.1 --enforce-eager, Qwen3-14B-AWQ on an A100, median TPOT 20.94 ms).
EAGER_LAYER_S = 0.000245
# Fitted likewise: the API server's serial time per request before the engine sees it (HTTP
# handling, tokenization, building the engine's request; one request at a time, so a burst
# queues), on the buildkite9555 llama70B-tp4-qps1 run (V0, 8xH100, 1 req/s: median TTFT
# 56.99 ms), where V0's latency outside the queue is inside the fit. One value for V0 and
# V1: V1's API server does the same work on its event loop (vllm/v1/engine/async_llm.py
# add_request, Processor.process_inputs; prompts tokenized on one thread, the
# ThreadPoolExecutor(max_workers=1) of serving_engine.py that vllm#25301 quotes), and the one V1
# burst kept bounds it: the kvcached h100-qwen3-06b-inf run (vLLM 0.19.0, 500 prompts at
# once) passed 500 requests in 5.40 s and its 495th first token came at 4.90 s (p99 TTFT),
# so a serial time per request of at most 10.8 ms and 9.9 ms; fitted on that run's median
# TTFT (2,869.83 ms) it would be 11.4 ms, above both.
FRONTEND_S = 0.00945
# V1's latency per request outside that queue: the request's hop over ZMQ to the engine
# core's input thread, which decodes it, builds the Request and puts it on the busy loop's
# input queue, and each output's way back through the output thread's encode and send
# (EngineCoreProc.process_input_sockets, process_output_sockets in vllm/v1/engine/core.py @
# 00080ee13c7a451fce071ccb8d0e94d395acf5a7), then AsyncLLM's output_handler and
# OutputProcessor, the request's output collector and the OpenAI server's SSE chunk: time in
# transit and in other threads, which no other request waits on, paid by the first token and
# by the last alike. No published figure gives it (vllm#46121 proposes a benchmark of the
# ZMQ path and gives no number); fitted on the kvcached h100-qwen3-06b-rps16 run (vLLM
# 0.19.0, Qwen3-0.6B on an H100 at 16 req/s, about five requests in flight: median TTFT
# 36.03 ms, where the prefill is about 1 ms). V0's is inside FRONTEND_S's fit (0).
V1_FRONTEND_LATENCY_S = 0.0226
SOURCES = {
    "v0": "V0 engine loop (vllm/engine/llm_engine.py): scheduling, sampling, detokenization "
          "and output processing run on the host between steps, per sequence; graphs for "
          "decode batches <= 256 (vllm/worker/model_runner.py _BATCH_SIZES_TO_CAPTURE)",
    "v1": "V1 engine core (vllm/v1/engine/core.py): detokenization and streaming run in the "
          "API server process (vllm/v1/engine/output_processor.py), beside the busy loop; "
          "piecewise graphs up to 512 tokens (CompilationConfig cudagraph_capture_sizes)",
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
    source: str

    def coefficients(self) -> dict:
        """The Coefficients fields these terms set."""
        return {"cpu_step_s": self.cpu_step_s, "cpu_per_seq_s": self.cpu_per_seq_s,
                "cpu_overlap": self.cpu_overlap, "eager_layer_s": self.eager_layer_s,
                "graph_max_tokens": self.graph_max_tokens,
                "graph_prefill": self.graph_prefill, "frontend_s": self.frontend_s,
                "frontend_latency_s": self.frontend_latency_s}


def engine_terms(row: VllmRow, enforce_eager: bool = False,
                 async_scheduling: bool = False) -> EngineTerms:
    """The row's terms. --enforce-eager: every step outside graphs. --async-scheduling (V1):
    the host prepares step n+1 while the GPU runs step n, so the step takes the larger of the
    two (vllm/v1/engine/core.py step_with_batch_queue)."""
    v0 = row.formula == "v0"
    graph_max = 0 if enforce_eager else (V0_GRAPH_MAX if v0 else V1_GRAPH_MAX)
    # V1 compiles the model (torch.compile); a step above the captured sizes runs the
    # compiled kernels without a graph, whose launch cost no fixture measures: only
    # --enforce-eager (no compile, no graphs) pays the eager cost there
    eager = EAGER_LAYER_S if v0 or enforce_eager else 0.0
    per_seq = V0_CPU_PER_SEQ_S if v0 else V1_CPU_PER_SEQ_S
    latency = 0.0 if v0 else V1_FRONTEND_LATENCY_S
    notes = [f"{row.tag}: {SOURCES[row.formula]}",
             f"cpu_per_seq_s {per_seq:g} s (V0: fitted on sglang a100-8b-inf; V1: "
             "scheduling, input preparation and output update per request, fitted on "
             "kvcached h100-qwen3-06b-inf)",
             f"cpu_step_s {0 if v0 else V1_CPU_STEP_S:g} s (V1: fitted on kvcached "
             "h100-qwen3-06b-rps16; V0: inside cpu_per_seq_s)",
             f"eager_layer_s {eager:g} s (fitted on vllm#20469; V1 without "
             "--enforce-eager: 0, compiled steps above the graphs are not priced)",
             f"frontend_s {FRONTEND_S:g} s (the API server's serial time per request; "
             "fitted on buildkite 9555 qps 1)",
             f"frontend_latency_s {latency:g} s (outside the API server's queue: V1's hops to "
             "the engine core and back, fitted on kvcached h100-qwen3-06b-rps16; V0: inside "
             "frontend_s's fit)"]
    if enforce_eager:
        notes.append("--enforce-eager: no CUDA graphs")
    if async_scheduling:
        notes.append("--async-scheduling: host work overlaps the GPU's")
    return EngineTerms(0.0 if v0 else V1_CPU_STEP_S, per_seq,
                       1.0 if async_scheduling else 0.0, eager, graph_max,
                       0.0 if v0 else 1.0, FRONTEND_S, latency, "; ".join(notes))


def with_release(coef: Coefficients, row: VllmRow, enforce_eager: bool = False,
                 async_scheduling: bool = False) -> Coefficients:
    """coef with the row's terms on top, its source naming the release and each term's own
    (what simulate and search both price a release's steps with)."""
    terms = engine_terms(row, enforce_eager, async_scheduling)
    return override(coef, terms.coefficients(), f"{coef.source}; engine {row.pin}: "
                    f"{terms.source}")
