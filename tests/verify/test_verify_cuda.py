"""verify on a CUDA device: NVML reads the GPU torch uses, out of memory is a verdict, and a
step's time is its device time."""

import json

import pytest
import torch
from typer.testing import CliRunner

from servecap.cli.app import app

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


def test_nvml_opens_the_gpu_torch_uses_by_pci_bus_id() -> None:
    from servecap.runtime.telemetry import CudaProbe, _pci_bus_id

    probe = CudaProbe("cuda:0", 256 * 2**20)
    bus = _pci_bus_id(torch.cuda.get_device_properties(0))
    info = probe.nvml.nvml.nvmlDeviceGetPciInfo(probe.nvml.handle)
    nvml_bus = info.busId.decode() if isinstance(info.busId, bytes) else info.busId
    assert nvml_bus.lower().endswith(bus.lower()[-12:])
    assert probe.context_bytes() > 0 and not probe.charges_context()
    torch.cuda.set_per_process_memory_fraction(1.0, 0)  # the cap outlives the probe


def test_out_of_memory_in_warm_up_on_cuda_is_a_violation() -> None:
    result = CliRunner().invoke(app, ["verify", "tiny-llama", "--device", "cuda:0",
                                      "--device-memory", "64MiB", "--runtime-peak", "64KiB",
                                      "--safety", "0B", "--no-probe", "--json"])
    assert result.exit_code == 1, result.output
    out = json.loads(result.stdout)
    assert "out_of_memory_warmup" in out["violations"]


def test_every_step_synchronises_so_step_times_are_device_times() -> None:
    from servecap.model_configs import load_model
    from servecap.runtime.calibration import StepClock
    from servecap.runtime.engine import Engine, EngineConfig
    from servecap.runtime.kv_pool import KVPool
    from servecap.runtime.sequence import Arrival
    from servecap.runtime.weights import random_decoder

    spec = load_model("tiny-llama").spec
    model = random_decoder(spec, "fp32", "cuda", 0)
    engine = Engine(model, KVPool(spec, 64, 16, "fp32", "cuda"),
                    EngineConfig(max_num_batched_tokens=16))  # partial prefill chunks first
    clock = StepClock()
    engine.step_hooks.append(clock)
    engine.run([Arrival(0.0, 100, 4)])
    assert len(clock.samples) == 7 + 3  # 7 chunks of <= 16 prompt tokens, then 3 decodes
    assert all(s.duration_s > 0 for s in clock.samples)
