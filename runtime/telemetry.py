"""Memory telemetry per phase: allocator, NVML and RSS on CUDA; allocator counts on the CPU.

Phases: baseline, weights, kv_pool, warmup, peak (steady state under the load), release. On the
CPU the device is emulated: the bytes charged to it are the runtime's resident tensors plus
every allocation a forward pass makes (counted at the CPU allocator, inside fused ops too),
capped at --device-memory.
"""

import os
from dataclasses import asdict, dataclass

import torch

from servecap.ledger.errors import SpecError

from .nvml import Nvml, no_driver

PHASES = ("baseline", "weights", "kv_pool", "warmup", "peak", "release")


@dataclass(frozen=True)
class Snapshot:
    """One phase. tensor_bytes: live tensors (CUDA: allocated); CUDA-only fields are None on
    the CPU. non_torch_bytes = this process's device memory - allocator reserved."""

    phase: str
    tensor_bytes: int
    peak_tensor_bytes: int
    process_rss_bytes: int
    reserved_bytes: int | None = None
    peak_reserved_bytes: int | None = None
    free_bytes: int | None = None
    total_bytes: int | None = None
    nvml_used_bytes: int | None = None
    nvml_total_bytes: int | None = None
    process_used_bytes: int | None = None
    non_torch_bytes: int | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def process_rss_bytes() -> int:
    """Resident set size from /proc (Linux), else the peak from getrusage."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


KINETO_QUIET = "6"


class AllocatorCounter:
    """Counts bytes at the CPU allocator while active (torch.profiler's allocation events, one
    per c10 allocate and free), so buffers a fused op allocates inside itself count as well as
    every tensor an op returns. Totals are folded in when the block exits: current_bytes is the
    net growth since counting began, peak_bytes the most it held. The emulated device refuses
    as a device does: the first allocation that would take the sum past `cap_bytes` is
    `refused` (held bytes then, bytes asked), it is never counted as held and the peak stops
    there; the exit, or the next fold (at most FOLD_EVERY_STEPS steps later), raises
    MemoryError, so the run stops as it would have on the device."""

    FOLD_EVERY_STEPS = 64  # a profiler session holds every event: fold and restart this often

    def __init__(self, cap_bytes: int | None = None) -> None:
        self.cap_bytes = cap_bytes
        self.current_bytes = self.peak_bytes = 0
        self.refused: tuple[int, int] | None = None  # (held, asked) at the first refusal
        self._profile = None
        self._steps = 0

    def __enter__(self) -> "AllocatorCounter":
        if self._profile is not None:
            raise RuntimeError("AllocatorCounter is already counting")
        self.refused = None
        self._start()
        return self

    def _start(self) -> None:
        from torch.profiler import ProfilerActivity, profile

        # Kineto prints 'USDT ... profiler_start/stop' on stderr at every start and stop; only a
        # level past its last (USDT = 5) quiets them. A level the user set is kept.
        os.environ.setdefault("KINETO_LOG_LEVEL", KINETO_QUIET)
        session = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
        session.__enter__()
        self._profile = session

    def _stop(self, *exc) -> None:
        """Close the session whatever happens, then fold what it saw."""
        session, self._profile = self._profile, None
        if session is not None:
            session.__exit__(*exc)
            self._fold(session.profiler.kineto_results)

    def fold_every(self, _stats=None) -> None:
        """A step hook: every FOLD_EVERY_STEPS steps the session's events are folded into the
        running sums and a new session starts, so a long run holds a bounded event list (the
        sums run on across sessions, so the peak is the same)."""
        self._steps += 1
        if self._profile is not None and self._steps % self.FOLD_EVERY_STEPS == 0:
            self._stop(None, None, None)
            if self.refused is not None:
                raise MemoryError(self.refusal())
            self._start()

    def __exit__(self, *exc) -> None:
        self._stop(*exc)
        if exc[0] is None and self.refused is not None:
            raise MemoryError(self.refusal())

    def refusal(self) -> str:
        held, asked = self.refused or (0, 0)
        return (f"emulated device out of memory: {asked:,} B asked with {held:,} B of "
                f"transients held, {self.cap_bytes or 0:,} B left for them")

    def _fold(self, results) -> None:
        """Allocations and frees in time order: a running sum, and the most it held before
        the first allocation past the cap (refused; the events after it are the host's, a
        device would have stopped there)."""
        sizes = [(node.start_time_ns, node.extra_fields.alloc_size)
                 for node in _walk(results.experimental_event_tree())
                 if type(node.extra_fields).__name__ == "_ExtraFields_Allocation"
                 and node.extra_fields.device.type == "cpu"]
        for _, size in sorted(sizes, key=lambda pair: pair[0]):
            if self.refused is None and size > 0 and self.cap_bytes is not None \
                    and self.current_bytes + size > self.cap_bytes:
                self.refused = (self.current_bytes, size)
            self.current_bytes += size
            if self.refused is None:
                self.peak_bytes = max(self.peak_bytes, self.current_bytes)

    def reset_peak(self) -> None:
        self.peak_bytes = self.current_bytes


def _walk(nodes):
    for node in nodes:
        yield node
        yield from _walk(node.children)


class CpuProbe:
    """The emulated device: resident tensors (weights, pool) registered by the runtime, plus
    transients counted while `counting()`; at most `device_bytes` in all."""

    kind = "cpu"

    def __init__(self, device_bytes: int) -> None:
        self.device_bytes = device_bytes
        self.resident_bytes = 0
        self.counter = AllocatorCounter()

    def add_resident(self, num_bytes: int, what: str) -> None:
        if self.resident_bytes + num_bytes > self.device_bytes:
            raise SpecError("--device-memory", self.device_bytes, f"the {what} "
                            f"({num_bytes:,} B) do not fit on the emulated device")
        self.resident_bytes += num_bytes

    def release_resident(self) -> None:
        self.resident_bytes = 0

    def counting(self) -> AllocatorCounter:
        self.counter.cap_bytes = self.device_bytes - self.resident_bytes
        return self.counter

    def reset_peak(self) -> None:
        self.counter.reset_peak()

    def transient_peak_bytes(self) -> int:
        return self.counter.peak_bytes

    def refused_bytes(self) -> int | None:
        """The allocation the emulated device last refused (None: none in the last phase)."""
        return self.counter.refused[1] if self.counter.refused else None

    def slack_bytes(self) -> int:
        return 0

    def context_bytes(self) -> int:
        return 0

    def charges_context(self) -> bool:
        return False

    def snapshot(self, phase: str) -> Snapshot:
        live = self.resident_bytes + self.counter.current_bytes
        return Snapshot(phase, live, self.resident_bytes + self.counter.peak_bytes,
                        process_rss_bytes())


class CudaProbe:
    """A CUDA device, optionally shrunk to `device_bytes` by the per-process memory fraction
    (the caching allocator refuses to reserve past it). NVML is opened before the CUDA context
    so the baseline shows the device without this process. The allocator runs with
    expandable_segments (stated in the record): without it a small request takes a whole
    20 MiB segment, and an emulated device of a few MiB could never hold the plan."""

    kind = "cuda"
    allocator_settings = "expandable_segments:True"

    def __init__(self, device: str, device_bytes: int | None) -> None:
        index = cuda_index(device)
        self.device = torch.device("cuda", index)
        props = torch.cuda.get_device_properties(index)
        self.nvml = Nvml(index, device, _pci_bus_id(props))
        self.nvml_before = self.nvml.read()
        _set_allocator(self.allocator_settings)
        torch.cuda.set_device(self.device)
        torch.cuda.init()
        torch.cuda.synchronize(self.device)
        total = props.total_memory
        self.device_bytes = min(device_bytes or total, total)
        self.emulated = self.device_bytes < total
        self.cuda_context_bytes = self._measure_context()
        torch.cuda.set_per_process_memory_fraction(self.device_bytes / total, self.device)

    def _measure_context(self) -> int:
        """This process's device memory before any tensor: the CUDA context (driver, kernels
        loaded so far), a non-torch line of its own."""
        reading = self.nvml.read()
        if reading.process_used_bytes is not None:
            return reading.process_used_bytes
        return max(0, reading.used_bytes - self.nvml_before.used_bytes)

    def context_bytes(self) -> int:
        return self.cuda_context_bytes

    def charges_context(self) -> bool:
        """The whole GPU carries the context; an emulated size caps the allocator only."""
        return not self.emulated

    def add_resident(self, num_bytes: int, what: str) -> None:
        """Resident tensors are counted by the allocator itself on CUDA."""

    def release_resident(self) -> None:
        """The allocator sees the release itself."""

    def counting(self):
        from contextlib import nullcontext

        return nullcontext()

    def reset_peak(self) -> None:
        torch.cuda.synchronize(self.device)
        self.base_allocated = torch.cuda.memory_allocated(self.device)
        torch.cuda.reset_peak_memory_stats(self.device)

    def transient_peak_bytes(self) -> int:
        return torch.cuda.max_memory_allocated(self.device) - self.base_allocated

    def slack_bytes(self) -> int:
        """Allocator slack at its peak: reserved - allocated (fragmentation, cached blocks)."""
        stats = torch.cuda.memory_stats(self.device)
        return stats.get("reserved_bytes.all.peak", 0) - stats.get("allocated_bytes.all.peak", 0)

    def snapshot(self, phase: str) -> Snapshot:
        torch.cuda.synchronize(self.device)
        stats = torch.cuda.memory_stats(self.device)
        free, total = torch.cuda.mem_get_info(self.device)
        nv = self.nvml.read()
        mine = nv.process_used_bytes
        if mine is None:  # not listed (PID namespace): the device's growth since we started
            mine = max(0, nv.used_bytes - self.nvml_before.used_bytes)
        reserved = stats.get("reserved_bytes.all.current", 0)
        return Snapshot(phase, stats.get("allocated_bytes.all.current", 0),
                        stats.get("allocated_bytes.all.peak", 0), process_rss_bytes(),
                        reserved, stats.get("reserved_bytes.all.peak", 0), int(free),
                        int(total), nv.used_bytes, nv.total_bytes, mine, mine - reserved)


def _set_allocator(settings: str) -> None:
    """Before the first allocation; an allocator already configured is left as it is."""
    if "PYTORCH_CUDA_ALLOC_CONF" in os.environ:
        return
    setter = getattr(torch.cuda.memory, "_set_allocator_settings", None)
    if setter is not None:
        setter(settings)


def _pci_bus_id(props) -> str | None:
    """'00000000:3b:00.0', NVML's form, from torch's device properties (None if absent)."""
    bus = getattr(props, "pci_bus_id", None)
    if bus is None:
        return None
    return f"{getattr(props, 'pci_domain_id', 0):08x}:{bus:02x}:" \
        f"{getattr(props, 'pci_device_id', 0):02x}.0"


def cuda_index(device: str) -> int:
    """The index of 'cuda' / 'cuda:N' once a driver and that device are seen, else one
    SpecError (serve and verify refuse alike)."""
    if not torch.cuda.is_available():
        raise no_driver(device)
    index = torch.device(device).index or 0
    if index >= torch.cuda.device_count():
        raise SpecError("--device", device, f"{torch.cuda.device_count()} CUDA device(s) "
                        "visible (CUDA_VISIBLE_DEVICES renumbers them from 0)")
    return index


def check_device(device: str) -> None:
    """Where `serve` runs: cpu, or a CUDA device this machine has (else one line, exit 2,
    not torch's traceback once the weights load)."""
    if device == "cpu":
        return
    if device != "cuda" and not (device.startswith("cuda:") and device[5:].isdigit()):
        raise SpecError("--device", device, "allowed: cpu, cuda, cuda:N")
    cuda_index(device)


def probe_for(device: str, device_bytes: int | None):
    """'cpu' needs --device-memory (the emulated size); 'cuda' / 'cuda:N' opens that GPU."""
    if device == "cpu":
        if device_bytes is None:
            raise SpecError("--device-memory", None, "required with --device cpu: the size of "
                            "the emulated device, e.g. 2GiB")
        return CpuProbe(device_bytes)
    if device == "cuda" or device.startswith("cuda:"):
        return CudaProbe(device, device_bytes)
    raise SpecError("--device", device, "allowed: cpu, cuda, cuda:N")
