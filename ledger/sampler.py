"""The bytes vLLM V1's sampler moves per running request per step when requests sample (not
greedy): each op's reads and writes over the request's row of vocab_size logits, counted from
the release's source (the wheels' Python at the tag). Pure arithmetic; the step model turns
the bytes into time at the device's bandwidth (memory-bound kernels, outside CUDA graphs).

Where the sampling parameters come from: from v0.8.0 a server's defaults are the model's
generation_config.json (vllm/engine/arg_utils.py EngineArgs.generation_config "auto"; at
v0.23.0 ModelConfig.get_diff_sampling_param, vllm/config/model.py: temperature, top_k, top_p,
repetition_penalty...), used for every field a request leaves unset. `vllm bench serve` sent
temperature 0 (greedy: vLLM's sampler takes the argmax and skips all of this) up to v0.14.x
(vllm/benchmarks/lib/endpoint_request_func.py at v0.11.0 "temperature": 0.0; serve.py at
v0.14.0 sets it when --temperature is absent); from v0.15.0 it sends none ("vllm bench serve
no longer sets temperature==0 (greedy) in requests by default", vllm/benchmarks/serve.py).

Row passes, R = one fp32 row (4 x vocab bytes), per request (vllm/v1/sample/sampler.py):
- logits to fp32: read bf16, write fp32: 1.5 R; temperature (div_): 2 R.
- penalties (any of repetition/frequency/presence set; vllm/model_executor/layers/utils.py
  apply_penalties at v0.23.0): two int64 bin-count rows, each zeroed (2 R), read by the
  > 0 compare (2 R) into a bool mask (0.25 R), for the prompt and the output: 8.5 R;
  apply_repetition_penalties (read logits and two masks, write logits) 2.5 R; frequency
  (int64 counts times a scalar, then logits -=) 6 R; presence (mask times a scalar, then
  logits -=) 4.25 R: 21.25 R.
- top-k/top-p, by path (vllm/v1/sample/ops/topk_topp_sampler.py at the tag):
  * TORCH ("torch"): apply_top_k_top_p_pytorch: logits.sort (CUB radix sort of fp32 keys with int64
    indices: ceil(32 / 8) = 4 passes, each reading and writing keys and values, 6 R a pass,
    and the index and key copies, 5 R: 29 R), top-k compare and masked_fill 3.5 R, top-p
    softmax, cumsum, compare and masked_fill 8.5 R, scatter_ back 4 R: 45 R;
  * TRITON: apply_top_k_top_p_triton (vllm/v1/sample/ops/topk_topp_triton.py, batches of
    8 or more from v0.17.1): one pass reading the row for its outliers, one reading and
    writing the masked row: 3 R;
  * FLASHINFER: top_k_top_p_sampling_from_logits (VLLM_USE_FLASHINFER_SAMPLER on by
    default from v0.21.0, vllm/envs.py): the top-k mask (read, write), softmax (read twice,
    write), rejection top-p sampling (about two reads): 7 R, and no separate sampling below.
- sampling from the probabilities (native paths): softmax 3 R, exponential noise 1 R,
  probs / q 3 R, argmax 1 R: 8 R.
These counts are the reads and writes the code issues, not a fit; caches are not counted
(a 152K-vocab row is 0.6 MB: each op's output evicts the previous one's on every device)."""

from .vllm_profile import sampler_path
from .vllm_row import FLASHINFER, MRV2, TORCH, TRITON, VllmRow

ROW_BYTES_PER_TOKEN = 4  # the sampler works in fp32 (Sampler.forward: logits.to(torch.float32))
CAST_TEMPERATURE_ROWS = 3.5
PENALTY_ROWS = 21.25
NONE = "none"  # no top-k or top-p: sampling only
FILTER_ROWS = {NONE: 0.0, TORCH: 45.0, TRITON: 3.0, FLASHINFER: 7.0}
SAMPLE_ROWS = {NONE: 8.0, TORCH: 8.0, TRITON: 8.0, FLASHINFER: 0.0}
GENERATION_CONFIG_FROM = (0, 8, 0)  # the server's defaults come from generation_config.json


def filter_path(row: VllmRow, top_k: int, top_p: float, batch: int = 8,
                runner_sampler: str | None = None) -> str:
    """Which top-k/top-p implementation a step of `batch` sampling requests runs: NONE without
    top-k or top-p, else the release's (ledger/vllm_profile.py sampler_path, the path the
    memory ledger prices the profile pass with: PyTorch's sort, Triton for batches of 8 or
    more from v0.17.1, FlashInfer from v0.21.0). runner_sampler: MRV2 where the model runs on
    Model Runner V2 (ledger/vllm_runner.py profile_sampler), whose sampler is not counted here."""
    if not (top_k > 0 or 0 < top_p < 1):
        return NONE
    return sampler_path(row, runner_sampler, batch)


def sampler_bytes_per_request(vocab_size: int, path: str, penalties: bool) -> int:
    """Bytes one sampling request's row costs the sampler per step on `path` (filter_path),
    with or without penalties: (cast and temperature + penalties + filter + sampling) rows of
    4 x vocab_size bytes; 0 on Model Runner V2's sampler (MRV2: not counted)."""
    if path == MRV2:
        return 0
    rows = CAST_TEMPERATURE_ROWS + (PENALTY_ROWS if penalties else 0.0) \
        + FILTER_ROWS[path] + SAMPLE_ROWS[path]
    return int(rows * ROW_BYTES_PER_TOKEN * vocab_size)


def defaults_apply(server: tuple[int, ...], client_sends_temperature: bool) -> bool:
    """Whether a request samples with the model's generation_config defaults: the server reads
    them (v0.8.0 on) and the client set no temperature."""
    return server >= GENERATION_CONFIG_FROM and not client_sends_temperature


def samples(generation_config: dict) -> bool:
    """Whether the defaults sample (temperature unset counts as 1.0: vLLM's SamplingParams
    default) rather than decode greedily (temperature 0)."""
    return float(generation_config.get("temperature", 1.0)) > 0.0


def has_penalties(generation_config: dict) -> bool:
    """Whether the defaults set a penalty away from its neutral value."""
    return float(generation_config.get("repetition_penalty", 1.0)) != 1.0 \
        or float(generation_config.get("frequency_penalty", 0.0)) != 0.0 \
        or float(generation_config.get("presence_penalty", 0.0)) != 0.0
