"""verify --calibration-out then simulate --coefficients on a device given by size: the file's
bandwidth and FLOPS replace the roofline's anyway, so they are not asked for again."""

import json

from typer.testing import CliRunner

from servecap.cli.app import app

FIT = {"coefficients": {"bandwidth_bytes_per_s": 2e10, "flops_per_s": 1e11,
                        "step_overhead_s": 0.005, "step_time_cv": 0.1},
       "residual_cv": 0.1, "rms_residual_s": 0.001, "num_samples": 16, "num_compute_bound": 1}


def _simulate(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["simulate", "tiny-llama", "--device", "16MiB",
                                      "--workload", "workloads/chat.yaml", "--json", *args])
    return result.exit_code, result.stdout


def test_a_calibration_file_gives_the_rates_a_sized_device_lacks(tmp_path) -> None:
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(FIT))
    code, alone = _simulate("--coefficients", str(path))
    assert code == 0, alone
    code, flagged = _simulate("--coefficients", str(path), "--bandwidth", "1GB/s",
                              "--flops", "1TFLOPS")
    assert code == 0
    assert json.loads(alone)["coefficients"] == json.loads(flagged)["coefficients"]
    assert json.loads(alone)["coefficients"]["bandwidth_bytes_per_s"] == 2e10


def test_without_rates_in_the_file_bandwidth_is_still_asked_for(tmp_path) -> None:
    path = tmp_path / "cal.json"
    path.write_text(json.dumps({"step_overhead_s": 0.005}))
    result = CliRunner().invoke(app, ["simulate", "tiny-llama", "--device", "16MiB",
                                      "--workload", "workloads/chat.yaml",
                                      "--coefficients", str(path)])
    assert result.exit_code == 2 and "--bandwidth is missing" in result.stderr
