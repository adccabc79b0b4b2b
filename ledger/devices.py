"""The device catalog: usable bytes as the driver reports them, beside the vendor's figures
(the capacity in the product name, its bandwidth and FLOPS)."""

import difflib
from dataclasses import dataclass

from .errors import SpecError
from .units import GB, SIZE_HELP, TB, GiB, MiB, TiB, parse_size, unit_hint

# Latency of one ring step of a collective and of one pipeline send: estimates (NCCL's
# small-message all-reduce is ~2(n-1) x 1-2 us on NVLink, several us over PCIe); aiconfigurator
# 0.12's system files use 10 us for p2p. Estimates, as every source below says: the ring step
# prices a device's all-reduces only where ledger/collectives.py has no measured table for
# its GPU count (the step model labels which).
NVLINK_STEP_S = 1.5e-6
PCIE_STEP_S = 5e-6
P2P_S = 10e-6
NVIDIA_SMI_RESERVE = 469 * MiB  # H100 SXM: nvidia-smi 81,559 MiB vs CUDA's 81,090 MiB
AIC = "aiconfigurator-core 0.12.0 systems/"
# How a tensor-parallel group's collectives travel (--interconnect; "nodes" where the group
# spans nodes, which vLLM's custom all-reduce refuses): what vLLM sets up for them differs.
NVLINK, PCIE, NODES = "nvlink", "pcie", "nodes"
INTERCONNECTS = (PCIE, NVLINK)


@dataclass(frozen=True)
class Device:
    """usable_bytes is what CUDA reports (cudaMemGetInfo total = torch total_memory: what vLLM
    multiplies by gpu_memory_utilization), below nvidia-smi's figure. nominal_gb is the
    capacity in the vendor's product name ('80GB'), a label and not a byte count: GPU memory
    comes in binary sizes, so an 80GB H100 carries 5 HBM3 stacks of 16 GiB, 80 GiB (85.9e9 B;
    nvidia-smi shows 81,559 MiB, CUDA 81,090 MiB = 85.03e9 B), more than 80 x 10^9 B; on
    most devices here usable_bytes exceeds nominal_gb x 10^9 and on none nominal_gb GiB.
    Bandwidth and dense tensor FLOPS by dtype are the vendor's decimal peaks;
    None where no source states them (or the device lacks the dtype). interconnect_bytes_per_s
    is one GPU's link to its peers, one direction (what a ring all-reduce moves per step);
    interconnect_latency_s is the latency of one ring step (collective) and p2p_latency_s of
    one point-to-point send between pipeline stages."""

    name: str
    label: str
    nominal_gb: int
    usable_bytes: int
    bandwidth_bytes_per_s: int | None
    bf16_flops_per_s: int | None
    source: str
    fp8_flops_per_s: int | None = None
    fp4_flops_per_s: int | None = None
    interconnect: str = "PCIe 4.0 x16"
    interconnect_bytes_per_s: int = 32 * GB
    interconnect_latency_s: float = PCIE_STEP_S
    p2p_latency_s: float = P2P_S

    def flops_per_s(self, weight_dtype: str) -> int | None:
        """Dense GEMM peak at the weights' dtype: fp8 and fp4 tensor cores where the device has
        them; weight-only int8/int4 dequantize to the activations and run at the BF16 rate."""
        if weight_dtype == "fp4" and self.fp4_flops_per_s:
            return self.fp4_flops_per_s
        if weight_dtype in ("fp8", "fp4") and self.fp8_flops_per_s:
            return self.fp8_flops_per_s
        return self.bf16_flops_per_s


# Streaming multiprocessors per GPU, from NVIDIA's architecture whitepapers and datasheets
# (H100 SXM5 132, H100 PCIe 114, A100 108, AD102 boards L40/L40S/RTX 6000 Ada 142, RTX 4090 128,
# AD104 L4 58, GA102 A10 72, A10G 80, RTX A6000 84, A40 84, RTX 3090 82, T4 40, B200 148,
# GB202 RTX 5090 170).
# Kernels that launch one program per SM size their buffers by it (vLLM's Triton top-k/top-p
# sampler); None: unknown.
SM_COUNTS = {"h100-80gb": 132, "h200-141gb": 132, "h100-nvl-94gb": 132, "h100-pcie-80gb": 114,
             "a100-40gb": 108, "a100-80gb": 108, "a100-pcie-40gb": 108, "a100-pcie-80gb": 108,
             "l40s-48gb": 142, "l40-48gb": 142,
             "rtx-6000-ada-48gb": 142, "rtx-4090-24gb": 128, "l4-24gb": 58, "a10-24gb": 72,
             "a10g-24gb": 80, "a6000-48gb": 84, "t4-16gb": 40, "b200-180gb": 148,
             "rtx-5090-32gb": 170, "a40-48gb": 84, "rtx-3090-24gb": 82}


# Host links of the parts whose `interconnect` is a GPU-to-GPU fabric, one direction (half the
# vendors' bidirectional figures): NVIDIA A100 datasheet ('PCIe Gen4: 64GB/s'), NVIDIA H100
# datasheet, SXM column ('PCIe Gen5: 128GB/s'), NVIDIA H200 datasheet ('PCIe Gen5: 128GB/s'),
# NVIDIA GB200 NVL72 datasheet (Grace to Blackwell over NVLink-C2C, 900 GB/s), AMD Instinct
# MI300X datasheet ('PCIe Gen 5 x16', 128 GB/s). A PCIe card's host link is its interconnect.
HOST_LINKS = {"a100-40gb": ("PCIe 4.0 x16", 32 * GB), "a100-80gb": ("PCIe 4.0 x16", 32 * GB),
              "h100-80gb": ("PCIe 5.0 x16", 64 * GB), "h200-141gb": ("PCIe 5.0 x16", 64 * GB),
              "gb200-186gb": ("NVLink-C2C", 450 * GB),
              "mi300x-192gb": ("PCIe 5.0 x16", 64 * GB)}


def host_link(device: "Device | None") -> tuple[str, int] | None:
    """(name, bytes/s one direction) of a catalog device's link to host memory: its own
    entry, else its PCIe interconnect; None where no vendor figure is held."""
    if device is None:
        return None
    if device.name in HOST_LINKS:
        return HOST_LINKS[device.name]
    if device.interconnect.startswith("PCIe"):
        return device.interconnect, device.interconnect_bytes_per_s
    return None


def tp_link(label: str, declared: str | None, tp: int,
            gpus_per_node: int | None = None) -> tuple[str, str]:
    """(link, why) of a tensor-parallel group: NODES where it spans nodes (vLLM places ranks
    TP-first, so a group of tp ranks spans nodes when tp exceeds the GPUs a node holds, tp x pp
    / nnodes), else the declared --interconnect, else the catalog device's (NVLINK for an
    NVLink part, PCIE for anything else, a bare size included); '' without tensor
    parallelism."""
    if tp <= 1:
        return "", "no tensor parallelism"
    if declared is not None and declared not in INTERCONNECTS:
        raise SpecError("--interconnect", declared, "pcie or nvlink")
    if gpus_per_node is not None and tp > gpus_per_node:
        return NODES, f"tp={tp} spans nodes of {gpus_per_node} GPUs"
    if declared is not None:
        return declared, f"declared: --interconnect {declared}"
    device = from_label(label)
    if device is None:
        return PCIE, "a device outside the catalog (PCIe assumed; --interconnect to state it)"
    kind = NVLINK if device.interconnect.startswith("NVLink") else PCIE
    return kind, f"the catalog's {device.name}: {device.interconnect}"


def sm_count(label: str) -> int | None:
    """The SM count of the catalog device a resolved label names, None when not known."""
    device = from_label(label)
    return SM_COUNTS.get(device.name) if device is not None else None


# CUDA compute capability (major, minor) of the NVIDIA devices, from NVIDIA's table
# (developer.nvidia.com/cuda-gpus): vLLM picks kernels and defaults by it (the largest CUDA-graph
# capture on SM 10.x, FlashInfer's GDN prefill on SM 9.0). AMD devices have none.
COMPUTE_CAPABILITY = {
    "t4-16gb": (7, 5), "a100-40gb": (8, 0), "a100-80gb": (8, 0), "a10-24gb": (8, 6),
    "a10g-24gb": (8, 6), "a6000-48gb": (8, 6), "l4-24gb": (8, 9), "l40-48gb": (8, 9),
    "l40s-48gb": (8, 9), "rtx-4090-24gb": (8, 9), "rtx-6000-ada-48gb": (8, 9),
    "h100-80gb": (9, 0), "h100-pcie-80gb": (9, 0), "h100-nvl-94gb": (9, 0), "h200-141gb": (9, 0),
    "h20-96gb": (9, 0), "b200-180gb": (10, 0), "gb200-186gb": (10, 0), "b300-288gb": (10, 3),
    "rtx-pro-6000-96gb": (12, 0), "rtx-5090-32gb": (12, 0), "a40-48gb": (8, 6),
    "rtx-3090-24gb": (8, 6)}


def compute_capability(label: str) -> tuple[int, int] | None:
    """The compute capability of the catalog device a resolved label names; None: not an
    NVIDIA device of the catalog."""
    device = from_label(label)
    return COMPUTE_CAPABILITY.get(device.name) if device is not None else None


def sm_version(label: str) -> int | None:
    """The compute capability as one number, as vLLM and NVIDIA write it (9.0 -> 90, 12.0 ->
    120); None off the catalog or on AMD devices."""
    capability = compute_capability(label)
    return capability[0] * 10 + capability[1] if capability is not None else None


def find(name: str) -> Device | None:
    """A catalog device by its name ('h200-141gb', any case), or by the one name it begins up
    to a dash ('h200'; 'a100' names two, so none): every command reads devices here."""
    key = name.strip().lower()
    exact = next((d for d in DEVICES if d.name == key), None)
    if exact is not None or not key:
        return exact
    begun = [d for d in DEVICES if d.name.startswith(key + "-")]
    return begun[0] if len(begun) == 1 else None


def from_label(label: str) -> Device | None:
    """The catalog device a resolved label names ('NVIDIA H100 80GB HBM3 (h100-80gb)')."""
    name = label.rsplit("(", 1)[-1].rstrip(")") if label.endswith(")") else label
    return find(name)


def _hint(text: str) -> str:
    """A unit hint for a bare unit ('80G' -> 80GiB or 80GB), else the catalog names a mistyped
    one points to ('a100' -> a100-40gb or a100-80gb)."""
    if unit_hint(text):
        return unit_hint(text)
    close = _close_names(text)
    return f"; did you mean {' or '.join(close)}?" if close else ""


def _close_names(text: str) -> list[str]:
    """Catalog names containing the text (dashes and spaces aside), else the closest spelt."""
    key = text.strip().lower().replace("-", "").replace(" ", "")
    names = [d.name for d in DEVICES]
    close = [n for n in names if key and key in n.replace("-", "")]
    return close or difflib.get_close_matches(text.strip().lower(), names, n=2)


MAX_DEVICE_BYTES = 64 * TiB  # far above any accelerator: a larger figure is a typo, not a GPU


def resolve_device(text: str, field: str = "device") -> tuple[int, str]:
    """A catalog name ('h100-80gb'), a label this returned ('NVIDIA H100 80GB HBM3
    (h100-80gb)', as a workbook keeps it) or a size ('40GiB', '80GB', bytes) -> (bytes, label)."""
    device = find(str(text)) or from_label(str(text).strip())
    if device is not None:
        return device.usable_bytes, f"{device.label} ({device.name})"
    try:
        size = parse_size(text, field)
    except SpecError as exc:
        if exc.allowed.startswith("not negative"):  # '-5GiB': the size rule, as for 0 below
            raise SpecError(field, text, NOT_A_SIZE) from None
        raise SpecError(field, text, f"expected a catalog name (see `servecap devices`) or "
                        f"{SIZE_HELP}{_hint(str(text))}") from None
    if 0 < size < MiB and str(text).strip().isdigit():  # '--device 40' meant 40 GiB, not bytes
        close = _close_names(str(text))
        also = f" (or the catalog's {close[0]}?)" if len(close) == 1 else ""
        raise SpecError(field, text, f"{int(size):,} bytes is not a device; give a unit: "
                        f"{text}GiB or {text}GB{also}")
    if size > MAX_DEVICE_BYTES:
        raise SpecError(field, text, "at most 64 TiB: one device's memory (a typo in the "
                        "number or unit?)")
    if size < 1:
        raise SpecError(field, text, NOT_A_SIZE)
    return size, str(text).strip()


NOT_A_SIZE = ("a device's memory, more than 0: a size like 40GiB or a catalog name (see "
              "`servecap devices`)")


DEVICES: tuple[Device, ...] = (
    Device("a100-40gb", "NVIDIA A100-SXM4-40GB", 40, 42_298_834_944, 1_555 * GB,
           312 * TB, "usable: deviceQuery 40339 MBytes (42298834944 bytes), bottlerocket PR "
           "#3873; 1,555 GB/s and 312 TFLOPS: NVIDIA A100 datasheet (via glennklockwood.com); "
           "NVLink 3 300 GB/s per direction (" + AIC + "a100_sxm.yaml)", interconnect="NVLink 3",
           interconnect_bytes_per_s=300 * GB, interconnect_latency_s=NVLINK_STEP_S),
    Device("a100-80gb", "NVIDIA A100-SXM4-80GB", 80, 84_987_740_160, 2_039 * GB,
           312 * TB, "usable: deviceQuery 81051 MBytes (84987740160 bytes), driver 12.2 "
           "(85100068864 bytes on 12.5); 2,039 GB/s and 312 TFLOPS: NVIDIA A100 datasheet; "
           "NVLink 3 300 GB/s per direction (" + AIC + "a100_sxm.yaml)", interconnect="NVLink 3",
           interconnect_bytes_per_s=300 * GB, interconnect_latency_s=NVLINK_STEP_S),
    Device("a100-pcie-40gb", "NVIDIA A100-PCIE-40GB", 40, 42_298_834_944, 1_555 * GB,
           312 * TB, "usable: estimate, the SXM4 40GB part's CUDA total (the same 40 GB of "
           "HBM2, nvidia-smi 40,960 MiB on both); 1,555 GB/s and 312 TFLOPS BF16 dense: "
           "NVIDIA A100 datasheet (PCIe column); PCIe 4.0 x16, no NVLink (a two-GPU NVLink "
           "bridge is optional: --interconnect nvlink)"),
    Device("a100-pcie-80gb", "NVIDIA A100 80GB PCIe", 80, 84_987_740_160, 1_935 * GB,
           312 * TB, "usable: estimate, the SXM4 80GB part's CUDA total (the same 80 GB of "
           "HBM2e, nvidia-smi 81,920 MiB on both); 1,935 GB/s and 312 TFLOPS BF16 dense: "
           "NVIDIA A100 datasheet (PCIe column); PCIe 4.0 x16, no NVLink (a two-GPU NVLink "
           "bridge is optional: --interconnect nvlink)"),
    Device("h100-80gb", "NVIDIA H100 80GB HBM3", 80, 85_028_896_768, 3_350 * GB,
           989_400 * GB, "usable: deviceQuery 81090 MBytes (85028896768 bytes), driver 12.8 "
           "(81079-81106 MiB on other drivers; nvidia-smi 81559 MiB); 3.35 TB/s and 989.4 "
           "TFLOPS dense: NVIDIA H100 SXM datasheet (via glennklockwood.com); FP8 1,978.9 TFLOPS "
           "dense, NVLink 4 450 GB/s per direction (" + AIC + "h100_sxm.yaml)",
           fp8_flops_per_s=1_978_900 * GB, interconnect="NVLink 4",
           interconnect_bytes_per_s=450 * GB, interconnect_latency_s=NVLINK_STEP_S),
    Device("h200-141gb", "NVIDIA H200", 141, 143_156 * MiB, 4_800 * GB, 989_400 * GB,
           "usable: torch total_memory=143156MB (MiB, floored; exact bytes unknown); "
           "nvidia-smi 143771 MiB; 4.8 TB/s, 989 TFLOPS BF16 (open-instruct PR 1441); FP8 1,978.9 "
           "TFLOPS dense, NVLink 4 450 GB/s per direction (" + AIC + "h200_sxm.yaml)",
           fp8_flops_per_s=1_978_900 * GB, interconnect="NVLink 4",
           interconnect_bytes_per_s=450 * GB, interconnect_latency_s=NVLINK_STEP_S),
    Device("l4-24gb", "NVIDIA L4", 24, 23_612_293_120, 300 * GB, 121 * TB,
           "usable: deviceQuery 22518 MBytes (23612293120 bytes); 300 GB/s; BF16 dense taken "
           "as half of the 242 TFLOPS NVIDIA quotes with sparsity; FP8 242 TFLOPS dense, PCIe 4.0 "
           "x16 32 GB/s (" + AIC + "l4.yaml)", fp8_flops_per_s=242 * TB),
    Device("a10g-24gb", "NVIDIA A10G", 24, 22_587 * MiB, 600 * GB, None,
           "usable: torch total_memory=22587MB (MiB, floored); 600 GB/s (baseten A10 vs A10G); "
           "BF16 FLOPS: unknown (not published)"),
    Device("a10-24gb", "NVIDIA A10", 24, round(22.18 * GiB), 600 * GB, 125 * TB,
           "usable: PyTorch's 'GPU 0 has a total capacity of 22.18 GiB' on one A10 "
           "(OpenBMB/MiniCPM-V issue 640, 2024-10; two decimals, exact bytes unknown; 22.06 GiB "
           "on an older driver, vllm issue 928); 600 GB/s, 125 TFLOPS BF16 dense (250 with "
           "sparsity): NVIDIA A10 datasheet; PCIe 4.0 x16. Not the A10G (AWS's variant)"),
    Device("l40s-48gb", "NVIDIA L40S", 48, 47_576_711_168, 864 * GB, 362_050 * GB,
           "usable: deviceQuery 45373 MBytes (47576711168 bytes), driver 12.4; 864 GB/s and "
           "362.05 TFLOPS dense: NVIDIA L40S datasheet table; FP8 733 TFLOPS, PCIe 4.0 32 GB/s "
           "(" + AIC + "l40s.yaml)", fp8_flops_per_s=733 * TB),
    Device("mi300x-192gb", "AMD Instinct MI300X", 192, 205_822_885_888, 5_300 * GB,
           1_307_400 * GB, "usable: rocm-smi VRAM Total Memory 205822885888 B (what torch/HIP "
           "reports: unknown); 5.3 TB/s, 1307.4 TFLOPS BF16 dense (MI300X-vs-H200 report); FP8 "
           "2,614.9 TFLOPS dense, Infinity Fabric 7 x 64 GB/s = 448 GB/s per direction: AMD "
           "MI300X datasheet", fp8_flops_per_s=2_614_900 * GB, interconnect="Infinity Fabric",
           interconnect_bytes_per_s=448 * GB, interconnect_latency_s=NVLINK_STEP_S),
    Device("rtx-4090-24gb", "NVIDIA GeForce RTX 4090", 24, 25_756_696_576, 1_008 * GB,
           165_200 * GB, "usable: deviceQuery 24564 MBytes (25756696576 bytes), Linux; "
           "1,008 GB/s; 165.2 TFLOPS BF16 with FP32 accumulate; FP8 330.3 TFLOPS dense with FP32 "
           "accumulate (Ada whitepaper); PCIe 4.0 x16", fp8_flops_per_s=330_300 * GB),
    Device("h100-pcie-80gb", "NVIDIA H100 PCIe", 80, 85_028_896_768, 2_000 * GB,
           756_500 * GB, "usable: estimate, H100 SXM's CUDA total (81090 MiB; same 80 GB "
           "HBM); 2.0 TB/s, 756.5 TFLOPS BF16 and 1,513 FP8 dense, PCIe 5.0 x16 64 GB/s per "
           "direction (" + AIC + "h100_pcie.yaml, NVIDIA H100 datasheet)",
           fp8_flops_per_s=1_513 * TB, interconnect="PCIe 5.0 x16",
           interconnect_bytes_per_s=64 * GB),
    Device("h100-nvl-94gb", "NVIDIA H100 NVL", 94, 95_830 * MiB - NVIDIA_SMI_RESERVE,
           3_900 * GB, 835_500 * GB, "usable: estimate, nvidia-smi 95830 MiB less the 469 MiB "
           "H100 SXM's driver keeps; 3.9 TB/s, 835.5 TFLOPS BF16 and 1,670.5 FP8 dense (half "
           "the sparse figures), NVLink bridge 600 GB/s = 300 per direction: NVIDIA H100 NVL "
           "datasheet", fp8_flops_per_s=1_670_500 * GB, interconnect="NVLink bridge",
           interconnect_bytes_per_s=300 * GB, interconnect_latency_s=NVLINK_STEP_S),
    Device("h20-96gb", "NVIDIA H20", 96, 97_871 * MiB - NVIDIA_SMI_RESERVE, 4_000 * GB,
           148 * TB, "usable: estimate, nvidia-smi 97871 MiB less the 469 MiB H100 SXM's "
           "driver keeps; 4.0 TB/s, 148 TFLOPS BF16 and 296 FP8 dense, NVLink 900 GB/s = 450 "
           "per direction: NVIDIA H20 product brief", fp8_flops_per_s=296 * TB,
           interconnect="NVLink 4", interconnect_bytes_per_s=450 * GB,
           interconnect_latency_s=NVLINK_STEP_S),
    Device("b200-180gb", "NVIDIA B200", 180, 183_359 * MiB - NVIDIA_SMI_RESERVE,
           7_700 * GB, 2_250 * TB, "usable: estimate, nvidia-smi 183359 MiB less the 469 MiB "
           "H100 SXM's driver keeps; 7.7 TB/s, 2,250 TFLOPS BF16, 4,500 FP8, 9,000 FP4 dense, "
           "NVLink 5 900 GB/s per direction (" + AIC + "b200_sxm.yaml)",
           fp8_flops_per_s=4_500 * TB, fp4_flops_per_s=9_000 * TB, interconnect="NVLink 5",
           interconnect_bytes_per_s=900 * GB, interconnect_latency_s=NVLINK_STEP_S),
    Device("b300-288gb", "NVIDIA B300", 288, 275_040 * MiB - NVIDIA_SMI_RESERVE,
           7_750 * GB, 2_250 * TB, "usable: estimate, nvidia-smi 275040 MiB (" + AIC +
           "b300_sxm.yaml) less the 469 MiB H100 SXM's driver keeps; 7.75 TB/s, 2,250 TFLOPS "
           "BF16, 4,500 FP8, 14,000 FP4 dense, NVLink 5 900 GB/s per direction (same file)",
           fp8_flops_per_s=4_500 * TB, fp4_flops_per_s=14_000 * TB, interconnect="NVLink 5",
           interconnect_bytes_per_s=900 * GB, interconnect_latency_s=NVLINK_STEP_S),
    Device("gb200-186gb", "NVIDIA GB200 (one Blackwell GPU)", 186,
           189_471 * MiB - NVIDIA_SMI_RESERVE, 8_000 * GB, 2_500 * TB, "usable: estimate, "
           "nvidia-smi 189471 MiB (" + AIC + "gb200.yaml) less the 469 MiB H100 SXM's driver "
           "keeps; 8 TB/s, 2,500 TFLOPS BF16, 5,000 FP8, 10,000 FP4 dense, NVLink 5 900 GB/s "
           "per direction (same file)", fp8_flops_per_s=5_000 * TB,
           fp4_flops_per_s=10_000 * TB, interconnect="NVLink 5",
           interconnect_bytes_per_s=900 * GB, interconnect_latency_s=NVLINK_STEP_S),
    Device("l40-48gb", "NVIDIA L40", 48, 47_576_711_168, 864 * GB, 181 * TB,
           "usable: estimate, the L40S's deviceQuery figure (same 48 GB GDDR6 board, "
           "nvidia-smi 46068 MiB on both); 864 GB/s, 181 TFLOPS BF16 and 362 FP8 dense (half "
           "the sparse figures): NVIDIA L40 datasheet; PCIe 4.0 x16",
           fp8_flops_per_s=362 * TB),
    Device("t4-16gb", "NVIDIA Tesla T4", 16, 15_835_660_288, 320 * GB, None,
           "usable: PyTorch's 'GPU 0; 14.75 GiB total capacity' (two decimals; exact bytes "
           "unknown); 320 GB/s: NVIDIA T4 datasheet; no BF16 tensor cores (65 TFLOPS FP16: "
           "give --flops 65TFLOPS to simulate fp16); PCIe 3.0 x16 16 GB/s",
           interconnect="PCIe 3.0 x16", interconnect_bytes_per_s=16 * GB),
    Device("a6000-48gb", "NVIDIA RTX A6000", 48, 51_045_924_864, 768 * GB,
           154_800 * GB, "usable: PyTorch's 'GPU 0; 47.54 GiB total capacity' (two "
           "decimals); 768 GB/s, 154.8 TFLOPS BF16 dense (309.7 with sparsity): NVIDIA RTX "
           "A6000 datasheet; PCIe 4.0 x16 (NVLink bridge 112.5 GB/s total not assumed)"),
    Device("rtx-6000-ada-48gb", "NVIDIA RTX 6000 Ada Generation", 48,
           49_140 * MiB - NVIDIA_SMI_RESERVE, 960 * GB, 364_250 * GB, "usable: estimate, "
           "nvidia-smi 49140 MiB less the 469 MiB H100 SXM's driver keeps; 960 GB/s, 364.25 "
           "TFLOPS BF16 and 728.5 FP8 dense (half the sparse figures): NVIDIA RTX 6000 Ada "
           "datasheet; PCIe 4.0 x16", fp8_flops_per_s=728_500 * GB),
    Device("rtx-pro-6000-96gb", "NVIDIA RTX PRO 6000 Blackwell Server Edition", 96,
           97_290 * MiB, 1_792 * GB, 467_800 * GB, "usable: 95.01 GiB, the total PyTorch "
           "reports on this card (torch.cuda.mem_get_info in vLLM 0.27.1's 'Free memory on "
           "device (94.05/95.01 GiB)' and its OOM's 'total capacity of 95.01 GiB', driver "
           "610.43.02: kubesimplify/website@00b7452 content/blog/running-a-big-llm-across-"
           "multiple-gpus-with-vllm.md), taken as 97,290 MiB, the MiB nearest it; nvidia-smi "
           "lists 97,887 MiB (" + AIC + "rtx_pro_6000_server.yaml), 597 MiB more; 1.792 TB/s, "
           "467.8 TFLOPS BF16, 935.6 FP8, 1,871.2 FP4 dense at 2,430 MHz, PCIe 5.0 x16 "
           "64 GB/s (same file)", fp8_flops_per_s=935_600 * GB,
           fp4_flops_per_s=1_871_200 * GB, interconnect="PCIe 5.0 x16",
           interconnect_bytes_per_s=64 * GB),
    Device("a40-48gb", "NVIDIA A40", 48, round(44.43 * 1024) * MiB, 696 * GB, 149_700 * GB,
           "usable: 44.43 GiB, the total vLLM 0.26.0 logs on an A40 ('Free memory on device "
           "(44.17/44.43 GiB)': vireshkoli/LLM-Inference-Optimization@1425eb74 results/logs/"
           "vllm-bf16.startup.log), taken as the MiB nearest it (48 GB GDDR6 with ECC); 696 "
           "GB/s, 149.7 TFLOPS BF16 dense (299.4 with sparsity): NVIDIA A40 datasheet; 84 "
           "SMs (NVIDIA Ampere GA102 whitepaper V2.0); PCIe 4.0 x16 (NVLink bridge 112.5 GB/s "
           "total not assumed)"),
    Device("rtx-3090-24gb", "NVIDIA GeForce RTX 3090", 24, round(23.58 * 1024) * MiB,
           936 * GB, 71_000 * GB, "usable: 23.58 GiB, the total_gpu_memory vLLM logs on an "
           "RTX 3090 under Linux (vllm-project/vllm issue 10517), taken as the MiB nearest it "
           "(cards driving a display or under WSL2 report less: 23.54 and 23.57 GiB in other "
           "logs); 936 GB/s GDDR6X; 71 TFLOPS BF16 dense with FP32 accumulate (142 with FP16 "
           "accumulate), 82 SMs: NVIDIA Ampere GA102 whitepaper V2.0, Appendix A; PCIe 4.0 "
           "x16; no FP8 tensor cores"),
    Device("rtx-5090-32gb", "NVIDIA GeForce RTX 5090", 32, 32_607 * MiB, 1_792 * GB,
           209_500 * GB, "usable: 32,607 MiB, nvidia-smi's total on an RTX 5090 (driver "
           "595.71.05: ai-dynamo/aiconfigurator@603ba746 src/aiconfigurator/systems/"
           "rtx_5090.yaml), which CUDA reports too (TensorRT-LLM's 'total: 31.84 GiB' on an "
           "RTX 5090, NVIDIA/TensorRT-LLM issue 4275); 1.792 TB/s GDDR7; 209.5 TFLOPS BF16 "
           "dense with FP32 accumulate, as the RTX 4090's entry (GeForce tensor cores "
           "accumulate in FP32 at half their FP16-accumulate rate: 419.2 dense, 838.4 sparse), "
           "FP8 419 dense with FP32 accumulate, FP4 1,676 dense (NVIDIA's 3,352 AI TOPS, "
           "sparse, halved; its accumulate width not stated): NVIDIA RTX Blackwell figures "
           "as restated by spheron.network and codesota.com (RTX 5090 specs); 170 SMs; "
           "PCIe 5.0 x16, no NVLink", fp8_flops_per_s=419_000 * GB,
           fp4_flops_per_s=1_676_000 * GB, interconnect="PCIe 5.0 x16",
           interconnect_bytes_per_s=64 * GB),
    Device("mi325x-256gb", "AMD Instinct MI325X", 256, 256 * GiB - 335_544_320,
           6_000 * GB, 1_307_400 * GB, "usable: estimate, 256 GiB less the 320 MiB MI300X's "
           "rocm-smi total keeps back; 6 TB/s, 1,307.4 TFLOPS BF16 and 2,614.9 FP8 dense, "
           "Infinity Fabric 7 x 64 GB/s = 448 GB/s per direction: AMD MI325X datasheet",
           fp8_flops_per_s=2_614_900 * GB, interconnect="Infinity Fabric",
           interconnect_bytes_per_s=448 * GB, interconnect_latency_s=NVLINK_STEP_S),
)
