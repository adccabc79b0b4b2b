"""simulate's and sweep's scheduler and deployment errors named the simulator's field, not the
flag typed ('watermark = 1.5', 'router = 'x'', 'num_scheduler_steps = 0'), and from a scenario
file named neither the file nor its field ('preemption = 'x'')."""

import pytest
from bad_input_checks import one_line_error

SIM = ("simulate", "llama-3.1-8b", "--device", "h100-80gb", "--input-len", "100",
       "--output-len", "10", "--num-requests", "5")


@pytest.mark.parametrize(("args", "said"), [
    (("--watermark", "1.5"), "--watermark = 1.5: a share of blocks in [0, 1)"),
    (("--preemption", "x"), "--preemption = 'x': one of recompute, swap"),
    (("--scheduling", "x"), "--scheduling = 'x': one of fcfs, priority"),
    (("--router", "x"), "--router = 'x': one of round-robin"),
    (("--replicas", "0"), "--replicas = 0: a whole number"),
    (("--replicas", "100000"), "--replicas = 100000: a whole number of devices, at most 4,096"),
    (("--disaggregate", "0:1"), "--disaggregate = '0:1': both pools need at least one device"),
    (("--disaggregate", "5000:1"), "--disaggregate = '5000:1': prefill:decode device counts"),
    (("--engine", "vllm==0.6.3", "--num-scheduler-steps", "0"),
     "--num-scheduler-steps = 0: a whole number >= 1"),
    (("--max-num-batched-tokens", "64", "--max-num-seqs", "128"),
     "--max-num-batched-tokens = 64: chunked prefill needs >= --max-num-seqs (128)")])
def test_a_bad_simulator_flag_is_named_as_typed(run, args, said) -> None:
    one_line_error(run(*SIM, *args), said)


def test_sweep_names_the_router_flag(run) -> None:
    one_line_error(run("sweep", "llama-3.1-8b", "--device", "h100-80gb", "--input-len", "100",
                       "--output-len", "10", "--router", "x"), "--router = 'x': one of")


def test_a_scenario_files_bad_preemption_names_the_file_and_field(run, tmp_path) -> None:
    saved = tmp_path / "full.yaml"
    assert run(*SIM, "--save-scenario", saved).exit_code == 0
    broken = tmp_path / "pm.yaml"
    broken.write_text(saved.read_text().replace("preemption_mode: recompute",
                                                "preemption_mode: x"))
    one_line_error(run("simulate", "--scenario", broken),
                   f"{broken}: scheduler.preemption_mode = 'x': one of recompute, swap")
