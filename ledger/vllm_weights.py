"""Weights as vLLM holds them on a device, beyond the checkpoint's bytes: the padded layouts of
its MXFP4 MoE kernels and the bf16 copies its MLA attention keeps. The checkpoint's bytes stay
the weights line; this is a line of its own, with the reason."""

from dataclasses import dataclass

from .errors import SpecError
from .kv import Shard
from .model import ModelSpec

MARLIN, TRITON, FLASHINFER = "marlin", "triton", "flashinfer"
MXFP4_BACKENDS = (MARLIN, TRITON, FLASHINFER)
MXFP4_BLOCK = 32  # elements per e8m0 scale
# round_up(intermediate, n) and round_up(hidden, n) per backend in Mxfp4MoEMethod.create_weights
# (vllm/model_executor/layers/quantization/mxfp4.py @v0.10.1.1 and @v0.14.1): Marlin needs
# n % 256 == 0 and k % 128 == 0; FlashInfer on SM100 pads both to 256; Triton pads to 64.
MXFP4_PADDING = {MARLIN: (128, 256), FLASHINFER: (256, 256), TRITON: (64, 1)}
MXFP4_SOURCE = ("vllm/model_executor/layers/quantization/mxfp4.py create_weights and "
                "utils/marlin_utils_fp4.py prepare_moe_fp4_layer_for_marlin @v0.10.1.1")
# The model dtypes (--dtype) a quantization method's kernels take: vLLM refuses any other at
# start-up (vllm/config/vllm.py@09f030e VllmConfig._get_quantization_config: model_config.dtype
# not in quant_config.get_supported_act_dtypes()). Read: Fp8Config (bfloat16, half;
# vllm/model_executor/layers/quantization/fp8.py@1436674), Mxfp4Config (bfloat16;
# quantization/mxfp4.py@afdb4a4). Methods not listed are planned at any dtype asked for.
ACT_DTYPES = {"fp8": ("bf16", "fp16"), "mxfp4": ("bf16",)}
MLA_SOURCE = ("vllm/v1/attention/backends/mla/common.py process_weights_after_loading "
              "@v0.10.2: W_UK_T and W_UV kept as bf16 copies of kv_b_proj")


@dataclass(frozen=True)
class Resident:
    """Bytes vLLM holds on this rank beyond the checkpoint's, and why."""

    extra_bytes: int
    reason: str


def mxfp4_backend(native_fp4: bool) -> str:
    """get_mxfp4_backend: FlashInfer where the GPU has FP4 tensor cores (SM100); Marlin's
    weight-only path elsewhere unless the optional triton_kernels package is installed (a log
    that says 'Using Triton backend' is planned with triton)."""
    return FLASHINFER if native_fp4 else MARLIN


def resident_extra(spec: ModelSpec, shard: Shard, backend: str) -> Resident | None:
    parts = [p for p in (_mxfp4_moe(spec, shard, backend), _mla_copies(spec, shard)) if p]
    if not parts:
        return None
    return Resident(sum(p.extra_bytes for p in parts), "; ".join(p.reason for p in parts))


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def _moe_layout_bytes(experts: int, inter: int, hidden: int) -> int:
    """One MoE layer in the MXFP4 layout: w13 (E, 2I, H/2) and w2 (E, H, I/2) uint8, their
    e8m0 scales (one per 32), bf16 biases (E, 2I) and (E, H)."""
    weights = experts * 3 * inter * hidden // 2
    scales = experts * (2 * inter * (hidden // MXFP4_BLOCK) + hidden * (inter // MXFP4_BLOCK))
    return weights + scales + experts * (2 * inter + hidden) * 2


def _mxfp4_moe(spec: ModelSpec, shard: Shard, backend: str) -> Resident | None:
    if spec.moe is None or spec.quant is None or spec.quant.method != "mxfp4":
        return None
    moe, tp = spec.moe, shard.tensor_parallel_size
    inter, hidden = -(-moe.expert_intermediate_size // tp), spec.hidden_size
    pad_i, pad_h = MXFP4_PADDING[backend]
    inter_p, hidden_p = _round_up(inter, pad_i), _round_up(hidden, pad_h)
    if (inter_p, hidden_p) == (inter, hidden):
        return None
    layers = len([n for n in shard.layer_ids(spec) if n not in moe.dense_layers])
    extra = layers * (_moe_layout_bytes(moe.num_experts, inter_p, hidden_p)
                      - _moe_layout_bytes(moe.num_experts, inter, hidden))
    return Resident(extra, f"{backend} MXFP4 MoE layout: intermediate {inter:,} -> "
                    f"{inter_p:,}, hidden {hidden:,} -> {hidden_p:,} in {layers} layers "
                    f"({MXFP4_SOURCE})")


def _mla_copies(spec: ModelSpec, shard: Shard) -> Resident | None:
    att = spec.attention
    if att.kind != "mla" or not att.kv_lora_rank or att.mla_per_head_cache:
        return None  # no MLA backend (vLLM before 0.7.1), no absorbed copies
    heads = max(1, att.num_heads // shard.tensor_parallel_size)
    per_layer = heads * (att.qk_nope_head_dim + att.v_head_dim) * att.kv_lora_rank * 2
    layers = len(shard.layer_ids(spec))
    return Resident(layers * per_layer, f"MLA: W_UK/W_UV bf16 copies, {heads} heads x "
                    f"{att.qk_nope_head_dim + att.v_head_dim} x {att.kv_lora_rank} in {layers} "
                    f"layers ({MLA_SOURCE})")


def check_act_dtype(method: str | None, dtype: str | None, given: object = None,
                    field: str = "--dtype") -> None:
    """A model dtype (servecap's name; `given`: as typed) the quantization method's kernels
    take (None: nothing to check)."""
    allowed = ACT_DTYPES.get(method or "")
    if dtype is not None and allowed is not None and dtype not in allowed:
        raise SpecError(field, dtype if given is None else given, f"{' or '.join(allowed)}: "
                        f"vLLM's {method} kernels take no other activations")
