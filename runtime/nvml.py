"""NVML (nvidia-ml-py): device used/total and this process's device memory, or a clear error."""

import os
from dataclasses import dataclass

from servecap.ledger.errors import SpecError

NO_DRIVER = "no NVIDIA driver found; use --device cpu"


@dataclass(frozen=True)
class NvmlReading:
    used_bytes: int
    total_bytes: int
    process_used_bytes: int | None  # None when NVML does not list this process (containers)


def no_driver(device: str) -> SpecError:
    return SpecError("--device", device, NO_DRIVER)


def init_error(pynvml, exc, device: str) -> SpecError:
    """A missing driver or library is 'no driver'; any other NVML failure says what it was."""
    missing = {getattr(pynvml, name, None) for name in (
        "NVML_ERROR_LIBRARY_NOT_FOUND", "NVML_ERROR_DRIVER_NOT_LOADED")} - {None}
    if getattr(exc, "value", None) in missing:
        return no_driver(device)
    return SpecError("--device", device, f"NVML failed to start ({_reason(exc)}); the driver "
                     "is there but cannot be queried (permissions, a driver/library mismatch?)")


def _reason(exc) -> str:
    text = str(exc)
    return text if text else type(exc).__name__


class Nvml:
    """One device, found by PCI bus id; every NVML failure is one clear line, never a crash."""

    def __init__(self, index: int, device: str, pci_bus_id: str | None = None) -> None:
        try:
            import pynvml
        except ImportError:
            raise SpecError("--device", device, "nvidia-ml-py is not installed (pip install "
                            "'servecap[runtime]'); " + NO_DRIVER) from None
        self.nvml, self.device = pynvml, device
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            raise init_error(pynvml, exc, device) from None
        self.handle = self._handle(index, pci_bus_id)

    def _handle(self, index: int, pci_bus_id: str | None):
        """By PCI bus id: CUDA_VISIBLE_DEVICES renumbers CUDA's devices, not NVML's, so the
        index is used only when it cannot be wrong (no renumbering in effect)."""
        if pci_bus_id:
            try:
                return self.nvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id.encode())
            except self.nvml.NVMLError as exc:
                raise SpecError("--device", self.device, f"NVML has no device at PCI bus id "
                                f"{pci_bus_id} ({_reason(exc)}); telemetry would read another "
                                "GPU") from None
        if os.environ.get("CUDA_VISIBLE_DEVICES"):
            raise SpecError("--device", self.device, "torch states no PCI bus id for this GPU "
                            "and CUDA_VISIBLE_DEVICES renumbers devices: NVML cannot tell which "
                            "one it is; unset CUDA_VISIBLE_DEVICES and pass --device cuda:N")
        try:
            return self.nvml.nvmlDeviceGetHandleByIndex(index)
        except self.nvml.NVMLError as exc:
            raise SpecError("--device", self.device, f"NVML cannot open device {index} "
                            f"({_reason(exc)})") from None

    def read(self) -> NvmlReading:
        info = self.nvml.nvmlDeviceGetMemoryInfo(self.handle)
        return NvmlReading(int(info.used), int(info.total), self._process_bytes())

    def _process_bytes(self) -> int | None:
        try:
            procs = self.nvml.nvmlDeviceGetComputeRunningProcesses(self.handle)
        except self.nvml.NVMLError:
            return None
        mine = [p.usedGpuMemory for p in procs if p.pid == os.getpid() and p.usedGpuMemory]
        return int(sum(mine)) if mine else None

    def versions(self) -> dict:
        """Driver and the CUDA version the driver supports, as NVML states them."""
        driver = self.nvml.nvmlSystemGetDriverVersion()
        cuda = self.nvml.nvmlSystemGetCudaDriverVersion()
        return {"driver_version": driver.decode() if isinstance(driver, bytes) else driver,
                "driver_cuda_version": f"{cuda // 1000}.{cuda % 1000 // 10}"}
