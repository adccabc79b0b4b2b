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


class Nvml:
    """One device by index; every NVML failure becomes the one 'no driver' line, never a crash."""

    def __init__(self, index: int, device: str, pci_bus_id: str | None = None) -> None:
        try:
            import pynvml
        except ImportError:
            raise SpecError("--device", device, "nvidia-ml-py is not installed (pip install "
                            "'servecap[runtime]'); " + NO_DRIVER) from None
        self.nvml, self.device = pynvml, device
        try:
            pynvml.nvmlInit()
            self.handle = self._handle(index, pci_bus_id)
        except pynvml.NVMLError:
            raise no_driver(device) from None

    def _handle(self, index: int, pci_bus_id: str | None):
        """By PCI bus id when known: CUDA_VISIBLE_DEVICES renumbers CUDA's devices, not NVML's."""
        if pci_bus_id:
            try:
                return self.nvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id.encode())
            except self.nvml.NVMLError:
                pass
        return self.nvml.nvmlDeviceGetHandleByIndex(index)

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
