"""Which kernel a vLLM release runs a weight format with on each GPU generation, or why it
refuses: each format's get_min_capability and its native / fallback paths, read at the tags
cited (vllm/model_executor/layers/quantization/...)."""

from dataclasses import dataclass

# (name, compute capability as vLLM compares it: major * 10 + minor)
GENERATIONS = (("blackwell", 100), ("hopper", 90), ("ada", 89), ("ampere", 80),
               ("turing", 75), ("volta", 70))
Q = "vllm/model_executor/layers/quantization/"
NATIVE_FP4 = "native NVFP4 GEMM (CUTLASS / FlashInfer FP4 tensor cores)"
MARLIN_FP4 = "Marlin W4A16: FP4 weights dequantized in the GEMM, 16-bit activations"


@dataclass(frozen=True)
class Kernel:
    """min_sm: below it the release refuses the format; native_sm: from it the native path,
    below it (down to min_sm) the fallback; source: where that was read."""

    min_sm: int
    native_sm: int
    native: str
    fallback: str
    source: str
    repack: str = ""  # 'marlin': GPTQ's g_idx dropped (or doubled with act-order)


def _at(version: tuple[int, ...], since: tuple[int, ...]) -> bool:
    return version[:3] + (0,) * (3 - len(version[:3])) >= since


def kernel(method: str, version: tuple[int, ...], sparse: bool = False,
           producer: str = "") -> Kernel | str:
    """The release's path for a format (method as ledger.model.Quant names it), or one line
    saying why it refuses it outright."""
    v = ".".join(map(str, version[:3]))
    if sparse:
        return _sparse(version, v)
    if method == "nvfp4":
        return _nvfp4(version, v)
    if method in ("fp8", "mxfp8"):
        return _fp8(method, version, producer)
    if method in ("gptq", "awq", "int4", "int8", "int2", "int3"):
        return _int(method, version, v)
    if method.startswith("bnb-"):
        if _at(version, (0, 28, 0)):
            return (f"vLLM {v} reads no bitsandbytes checkpoints (bitsandbytes.py is gone "
                    "from 0.28.0; the last release with it is 0.27.1)")
        return Kernel(70, 70, "bitsandbytes kernels on the stored 4/8-bit weights", "",
                      f"{Q}bitsandbytes.py BitsAndBytesConfig.get_min_capability @v0.27.1")
    if method == "mxfp4":
        return Kernel(80, 100, "FlashInfer MXFP4 MoE", "Marlin MXFP4 weight-only",
                      f"{Q}mxfp4.py get_mxfp4_backend @v0.10.1.1")
    return f"no vLLM kernel rule read for {method}"


def _nvfp4(version, v) -> Kernel | str:
    """modelopt NVFP4 from 0.8.0 (Blackwell only), a Marlin fallback from 0.9.0 (SM80) and
    0.14.0 (SM75): ModelOptNvFp4Config.get_min_capability at each tag."""
    if not _at(version, (0, 8, 0)):
        return f"vLLM {v} reads no NVFP4 checkpoints (ModelOptNvFp4Config is new in 0.8.0)"
    least = 100 if not _at(version, (0, 9, 0)) else 80 if not _at(version, (0, 14, 0)) else 75
    tag = "v0.8.5" if least == 100 else "v0.13.0" if least == 80 else "v0.32.0"
    return Kernel(least, 100, NATIVE_FP4, MARLIN_FP4,
                  f"{Q}modelopt.py ModelOptNvFp4Config.get_min_capability = {least} @{tag}; "
                  f"{Q}utils/marlin_utils_fp4.py prepare_fp4_layer_for_marlin @v0.32.0")


def _fp8(method, version, producer) -> Kernel:
    """FP8 GEMMs need SM89; below it, from the release's fallback on, Marlin runs FP8 weights
    dequantized (fp8.py get_min_capability 80 @v0.10.2, 75 @v0.20.2; modelopt FP8 89 until
    0.27.0, then 80)."""
    if method == "mxfp8":
        return Kernel(80, 100, "native MXFP8 GEMM", "Marlin MXFP8 weight-only",
                      f"{Q}modelopt.py ModelOptMxFp8Config.get_min_capability = 80 @v0.32.0")
    least = 75 if _at(version, (0, 14, 0)) else 80
    source = f"{Q}fp8.py Fp8Config.get_min_capability = {least} (80 until 0.13.0)"
    if producer.startswith("modelopt"):
        least = 80 if _at(version, (0, 27, 0)) else 89
        source = (f"{Q}modelopt.py ModelOptFp8Config.get_min_capability = {least} (89 until "
                  "0.26.0)")
    return Kernel(least, 89, "native FP8 GEMM (CUTLASS, per-tensor or per-channel scales)",
                  "Marlin W8A16: FP8 weights dequantized in the GEMM, 16-bit activations",
                  source)


def _int(method, version, v) -> Kernel:
    """GPTQ/AWQ-packed int weights: Marlin repacks them on SM80 (SM75 from 0.14.0); below,
    GPTQ's exllama kernel (SM60) and AWQ's own (SM75) run the checkpoint's layout."""
    marlin = 75 if _at(version, (0, 14, 0)) else 80
    least = 75 if method == "awq" else 60
    return Kernel(least, marlin, "Marlin: the packed weights repacked to Marlin's tiles (same "
                  "bytes; GPTQ's g_idx dropped without act-order)",
                  "GPTQ exllama / AWQ kernels on the checkpoint's layout",
                  f"{Q}gptq_marlin.py / awq_marlin.py get_min_capability = {marlin} "
                  f"(@v0.13.0: 80, @v0.14.0: 75); gptq.py 60, awq.py 75", repack="marlin")


def _sparse(version, v) -> Kernel | str:
    if _at(version, (0, 19, 0)):
        return (f"vLLM {v} refuses 2:4 sparse checkpoints (compressed_tensors_24.py: 'Sparse24 "
                "models are no longer supported by vLLM' from 0.19.0; the config is refused "
                "from 0.22.0)")
    return Kernel(90, 90, "CUTLASS 2:4 sparse GEMM (Hopper)", "",
                  f"{Q}compressed_tensors/schemes/compressed_tensors_24.py: 'Only cutlass 3.x "
                  "kernels are implemented so far' @v0.18.1")


def path_on(k: Kernel | str, sm: int) -> tuple[bool, str]:
    """(runs, how) on a GPU of compute capability `sm`."""
    if isinstance(k, str):
        return False, k
    if sm < k.min_sm:
        return False, f"needs SM{k.min_sm}+ ({k.source})"
    return True, k.native if sm >= k.native_sm or not k.fallback else k.fallback


def checkpoint_refusal(producer: str, mixed: bool, w4a16: bool, version: tuple[int, ...],
                       sm: int) -> str | None:
    """What a release refuses about a modelopt checkpoint as a whole, before any kernel:
    where it reads the config from (from_config @v0.8.5, @v0.10.0, @v0.11.2), MIXED_PRECISION
    (new in 0.17.0; ModelOptMixedPrecisionConfig.get_min_capability 89, 75 from 0.24.0) and
    W4A16_NVFP4 (new in 0.22.0)."""
    if not producer.startswith("modelopt"):
        return None
    v = ".".join(map(str, version[:3]))
    if producer != "modelopt:hf" and not _at(version, (0, 10, 0)):
        return (f"vLLM {v} reads modelopt quantization only from hf_quant_config.json "
                "(config.json's quantization_config from 0.10.0)")
    if producer == "modelopt:ignore" and not _at(version, (0, 11, 2)):
        return f"vLLM {v} does not read quantization_config.ignore (from 0.11.2)"
    if mixed and not _at(version, (0, 17, 0)):
        return f"vLLM {v} has no modelopt MIXED_PRECISION (new in 0.17.0)"
    if mixed and sm < (75 if _at(version, (0, 24, 0)) else 89):
        least = 75 if _at(version, (0, 24, 0)) else 89
        tag = "v0.24.0" if least == 75 else "v0.17.1 - v0.23.0"
        return (f"needs SM{least}+ ({Q}modelopt.py ModelOptMixedPrecisionConfig"
                f".get_min_capability = {least} @{tag})")
    if w4a16 and not _at(version, (0, 22, 0)):
        return f"vLLM {v} has no modelopt W4A16_NVFP4 (new in 0.22.0)"
    return None


def generation_of(sm: int) -> str:
    """The generation a compute capability belongs to (SM120 is Blackwell too)."""
    return next(name for name, least in GENERATIONS if sm >= least) if sm >= 70 else "pre-volta"


def gguf_kernel(version: tuple[int, ...]) -> Kernel | str:
    """vLLM read GGUF files until 0.23 (its GGUF kernels dequantize the blocks as they run;
    GGUFConfig.get_min_capability = 60); from 0.24.0 gguf.py is gone from the tree."""
    v = ".".join(map(str, version[:3]))
    if _at(version, (0, 24, 0)):
        return (f"vLLM {v} reads no GGUF files (quantization/gguf.py is gone from 0.24.0; "
                "the last release with it is 0.23.0)")
    return Kernel(60, 60, "GGUF blocks kept as stored, dequantized in vLLM's GGUF kernels",
                  "", f"{Q}gguf.py GGUFConfig.get_min_capability = 60 @v0.23.0")
