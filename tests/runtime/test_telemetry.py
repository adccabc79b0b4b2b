"""Telemetry: transient tensors are counted until they die, the emulated cap holds, and a missing
NVIDIA driver is one clear message."""

import pytest
import torch

from servecap.ledger.errors import SpecError
from servecap.runtime.nvml import NO_DRIVER, Nvml
from servecap.runtime.telemetry import AllocatorCounter, CpuProbe, probe_for

HAS_CUDA = torch.cuda.is_available()
SCALARS_BYTES = 64  # the allocator also sees the few bytes of scalar operands and indices


def test_counter_sees_transients_and_their_release() -> None:
    weight = torch.ones(256, 256)  # made outside: not counted
    counter = AllocatorCounter()
    with counter:
        x = torch.ones(64, 256)  # 64 KiB
        y = x @ weight  # 64 KiB
        view = y.view(-1)  # a view: no new bytes
        x.add_(1)  # in place: no new bytes
        del x, y, view
    assert counter.current_bytes == 0
    assert 0 <= counter.peak_bytes - 2 * 64 * 256 * 4 < SCALARS_BYTES


def test_writes_into_existing_storage_are_not_new_memory() -> None:
    pool = torch.zeros(4, 1024)  # resident before counting, like the KV pool
    counter = AllocatorCounter()
    with counter:
        pool.view(-1, 64).index_copy_(0, torch.tensor([3]), torch.ones(1, 64))
        pool[2].mul_(2)
        kept = pool.clone()
    assert 0 <= counter.current_bytes - 4 * 1024 * 4 < SCALARS_BYTES  # the clone is alive
    del kept


def test_allocations_inside_a_fused_op_are_seen() -> None:
    """3-D SDPA takes the math path: its (H, Q, Q) fp32 scores live only inside the op, where
    a counter of returned tensors never sees them; the allocator does."""
    heads, length, dim = 4, 512, 32
    q = torch.randn(heads, length, dim)
    counter = AllocatorCounter()
    with counter:
        out = torch.nn.functional.scaled_dot_product_attention(q, q, q)
    scores = heads * length * length * 4
    assert counter.peak_bytes >= scores + out.numel() * 4
    assert counter.current_bytes == out.numel() * 4


def test_emulated_device_refuses_what_does_not_fit() -> None:
    probe = CpuProbe(device_bytes=1 << 20)
    probe.add_resident(768 << 10, "weights")
    with pytest.raises(SpecError, match="do not fit"):
        probe.add_resident(512 << 10, "KV pool")
    with pytest.raises(MemoryError, match="emulated device out of memory"), probe.counting():
        torch.zeros(512 << 8)  # 512 KiB of fp32 > the 256 KiB left


def test_a_refused_allocation_is_not_counted_as_held() -> None:
    """A device refuses the allocation that does not fit; it never holds it. 128 KiB held,
    then 512 KiB asked of a 256 KiB cap: the peak stays at 128 KiB (it read 640 KiB, more
    than the device, when the refused bytes were summed in) and the refusal names both."""
    counter = AllocatorCounter(cap_bytes=256 << 10)
    with pytest.raises(MemoryError, match=r"524,288 B asked with 131,\d{3} B of transients "
                       r"held, 262,144 B left"), counter:
        held = torch.zeros(128 << 8)  # 128 KiB of fp32
        torch.zeros(512 << 8)  # 512 KiB: refused
        del held
    assert 128 << 10 <= counter.peak_bytes < (128 << 10) + SCALARS_BYTES
    assert counter.refused[1] == 512 << 10 and counter.peak_bytes <= counter.cap_bytes
    with counter:  # a new phase starts with nothing refused
        torch.zeros(16)
    assert counter.refused is None


def test_a_refusal_stops_the_run_at_the_next_fold() -> None:
    """As a device stops at its refusal, the emulated one stops at the next fold (every
    FOLD_EVERY_STEPS steps) rather than running the load to its end."""
    counter = AllocatorCounter(cap_bytes=64 << 10)
    steps = []
    with pytest.raises(MemoryError, match="emulated device out of memory"), counter:
        while len(steps) < 10 * counter.FOLD_EVERY_STEPS:
            steps.append(torch.zeros(32 << 10).numel())  # 128 KiB a step: refused in the first
            counter.fold_every()
    assert len(steps) == counter.FOLD_EVERY_STEPS


def test_cpu_snapshot_reports_resident_bytes_and_rss() -> None:
    probe = CpuProbe(device_bytes=1 << 30)
    probe.add_resident(4096, "weights")
    snap = probe.snapshot("weights")
    assert (snap.phase, snap.tensor_bytes, snap.reserved_bytes) == ("weights", 4096, None)
    assert snap.process_rss_bytes > 10 << 20  # the interpreter and libtorch at least


def test_cpu_needs_a_device_size() -> None:
    with pytest.raises(SpecError, match="--device-memory"):
        probe_for("cpu", None)
    with pytest.raises(SpecError, match="allowed: cpu, cuda, cuda:N"):
        probe_for("tpu", None)


@pytest.mark.skipif(HAS_CUDA, reason="this machine has a CUDA device")
def test_no_driver_is_a_clear_message() -> None:
    with pytest.raises(SpecError) as caught:
        probe_for("cuda:0", None)
    assert NO_DRIVER in caught.value.line()
    assert NO_DRIVER == "no NVIDIA driver found; use --device cpu"


@pytest.mark.skipif(HAS_CUDA, reason="this machine has a CUDA device")
def test_nvml_without_a_driver_is_the_same_message() -> None:
    with pytest.raises(SpecError, match="no NVIDIA driver found"):
        Nvml(0, "cuda:0")


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")
def test_cuda_snapshot_separates_reserved_allocated_and_non_torch() -> None:
    probe = probe_for("cuda:0", 8 << 30)
    block = torch.empty(256 << 20, dtype=torch.uint8, device="cuda:0")
    snap = probe.snapshot("weights")
    assert snap.tensor_bytes >= block.numel()
    assert snap.reserved_bytes >= snap.tensor_bytes
    assert snap.process_used_bytes >= snap.reserved_bytes
    assert snap.non_torch_bytes == snap.process_used_bytes - snap.reserved_bytes
    assert probe.device_bytes == 8 << 30
