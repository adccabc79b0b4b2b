"""The GPU's compute capability that plan --json reports beside a quantized checkpoint's formats
is the device catalog's: one table (ledger/devices.py COMPUTE_CAPABILITY). A second copy once
said SM100 for the B300, whose CUDA capability is 10.3."""

import json
from pathlib import Path

from servecap.ledger.devices import COMPUTE_CAPABILITY, DEVICES

QWEN = Path(__file__).resolve().parents[1] / "fixtures" / "configs" / \
    "nvidia--Qwen3.6-27B-NVFP4" / "config.json"


def _reported(run, device: str):
    out = run("plan", QWEN, "--device", device, "--context", "8192", "--json")
    return json.loads(out.stdout)["checkpoint_formats"]["device_compute_capability"]


def test_b300_is_sm103(run) -> None:
    assert _reported(run, "b300-288gb") == 103


def test_every_catalog_gpu_reports_the_catalog_capability(run) -> None:
    for device in DEVICES:
        major_minor = COMPUTE_CAPABILITY.get(device.name)
        expected = major_minor[0] * 10 + major_minor[1] if major_minor else None
        assert _reported(run, device.name) == expected, device.name
