"""bench/vllm_latency.py's experiments, measured and not adopted (docs/vllm-latency.md): the
sampler's derived cost (--price-sampler) and its variant holding the API server's time per
streamed token (--hold-streamed-token); each off by default, so the shipped table is as
simulate prices it."""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("vllm_latency", ROOT / "bench" / "vllm_latency.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)
CASES = bench.load_cases()


def test_the_sampler_experiment_prices_only_sampling_runs_and_only_when_asked() -> None:
    """--price-sampler (measured, not adopted: docs/vllm-latency.md) adds the sampler's bytes
    to the runs whose client leaves the model's generation_config defaults in force (vllm
    bench serve >= 0.15); a pre-0.15 client's greedy runs get none; off by default, so the
    shipped table is as simulate prices it."""
    by_fixture = {c.fixture: c for c in CASES}
    l4 = next(c for c in CASES if c.name == "wmx_vllm023_l4:l4-qwen25-05b-c32")
    assert bench.sampler_state_bytes(by_fixture["gpustack_vllm011_qwen3"]) == 0
    assert bench.sampler_state_bytes(by_fixture["mushfiq_rtx4090_mistral7b"]) == 0
    assert bench.sampler_state_bytes(l4) > 0
    assert not bench.SAMPLER["priced"]
    plain = sys.modules["vllm_cases"].setup_for(l4).coefficients.state_bytes_per_request
    bench.SAMPLER["priced"] = True
    try:
        priced = sys.modules["vllm_cases"].setup_for(l4).coefficients.state_bytes_per_request
        itl = bench.predict(l4)["itl_ms"]["p50"]
    finally:
        bench.SAMPLER["priced"] = False
    assert priced - plain == bench.sampler_state_bytes(l4)
    # the derived cost takes the L4 sweep's c32 ITL to within 15 % of the measured 7.1 ms
    assert abs(itl / l4.run["measured"]["median_itl_ms"] - 1) < 0.15


def test_the_streamed_token_variant_holds_that_term_only_beside_the_sampler(capsys) -> None:
    """--hold-streamed-token (a variant of --price-sampler, measured: docs/vllm-latency.md)
    holds the API server's time per streamed token at 0 as the prompt-token time is held:
    refused without --price-sampler; the shipped fit leaves the term free."""
    assert bench.main(["--hold-streamed-token", "--leave-one-source-out"]) == 2
    assert "only with it" in capsys.readouterr().err
    used = sys.modules["vllm_fit"]  # the fit bench/vllm_latency.py runs
    assert set(used.HELD_WITH_SAMPLER) == {"FRONTEND_OUTPUT_TOKEN_S"}
    assert "FRONTEND_OUTPUT_TOKEN_S" not in used.HELD
    everyone = {"runs": [c.name for c in CASES], "sources": sorted({c.source for c in CASES})}
    assert "FRONTEND_OUTPUT_TOKEN_S" in used.fittable(dict.fromkeys(used.NAMES, everyone))
    shipped = dict(used.HELD)
    used.HELD.update(used.HELD_WITH_SAMPLER)
    try:
        free = used.fittable(dict.fromkeys(used.NAMES, everyone))
        first = used.start(CASES[:1])
    finally:
        used.HELD.clear()
        used.HELD.update(shipped)
    assert "FRONTEND_OUTPUT_TOKEN_S" not in free and "FRONTEND_S" in free
    assert first["FRONTEND_OUTPUT_TOKEN_S"] == 0.0 and first["FRONTEND_PROMPT_TOKEN_S"] == 0.0


def test_eos_stop_spreads_only_the_runs_whose_client_stopped_at_eos_and_only_when_asked() -> None:
    """--eos-stop (measured, not adopted: docs/vllm-latency.md): a random-dataset run whose
    published mean output is under the max_tokens its client asked for (and no --ignore-eos)
    draws lengths min(geometric, cap) whose mean is the published one; a run sent with
    --ignore-eos (the L4 sweep) and every run while the flag is off keep fixed lengths."""
    cases = sys.modules["vllm_cases"]
    dist = cases.eos_stopped(100, 128)
    mean = sum(v * w for v, w in zip(dist.values, dist.weights, strict=True)) / sum(dist.weights)
    assert abs(mean - 100) < 0.01 and max(dist.values) == 128 and min(dist.values) == 1
    # a constant chance per token: each length below the cap is (1 - p) times the one before
    assert abs(dist.weights[1] / dist.weights[0] - dist.weights[51] / dist.weights[50]) < 1e-12
    c4 = next(c for c in CASES if c.name == "mushfiq_rtx4090_mistral7b:rtx4090-mistral7b-c4")
    l4 = next(c for c in CASES if c.name == "wmx_vllm023_l4:l4-qwen25-05b-c32")
    assert "max_output_len" not in l4.run["shape"]  # --ignore-eos: every output to its length
    assert not bench.EOS["stop"]
    assert cases.workload_for(c4).output.kind == "fixed"
    bench.EOS["stop"] = True
    try:
        spread = [r.output_tokens for r in cases.requests_for(c4)]
        fixed = {r.output_tokens for r in cases.requests_for(l4)}
    finally:
        bench.EOS["stop"] = False
    assert fixed == {128} and max(spread) == 128 and min(spread) < 100
    assert abs(sum(spread) / len(spread) - 100) < 8  # 300 draws about the published mean


def test_the_microbatch_intake_applies_to_v1_api_servers_from_0_10_1_and_only_when_asked() -> None:
    """--microbatch-intake (measured: docs/vllm-latency.md): the API server's tokenizer
    micro-batch (32 prompts, 2 ms) for runs through a V1 server of v0.10.1 or later (the L4
    sweep at 0.23.0, GPUStack's 0.11.0 pages), not GPUStack's 0.9.2 page nor V0 nor an
    offline run; off by default, and the engine's intake is restored after each run."""
    cases, experiments = sys.modules["vllm_cases"], sys.modules["vllm_experiments"]
    by_name = {c.name: c for c in CASES}
    l4 = by_name["wmx_vllm023_l4:l4-qwen25-05b-c32"]
    old = next(c for c in CASES if c.fixture == "gpustack_vllm092_qwen3_8b")
    v0 = next(c for c in CASES if c.data["engine"] == "v0")

    def seen(case):
        with experiments.intake_for(case, served=not cases.offline(case)):
            return dict(experiments.INTAKE)

    off = {"batch": 1, "window_s": 0.0}
    assert not bench.MICROBATCH["on"] and seen(l4) == off
    bench.MICROBATCH["on"] = True
    try:
        assert seen(l4) == {"batch": 32, "window_s": 0.002}
        assert seen(old) == off and seen(v0) == off
        on = bench.predict(l4)["ttft_ms"]["p50"]
    finally:
        bench.MICROBATCH["on"] = False
    assert experiments.INTAKE == off
    # the c32 loop's requests reach the server together and go on together: its TTFT grows
    assert on > 1.5 * bench.predict(l4)["ttft_ms"]["p50"]


def test_no_experiment_writes_the_shipped_fit(capsys) -> None:
    """Every experiment flag refuses --write: sim/engine_fit.json is what simulate runs."""
    for flag in ("--price-sampler", "--eos-stop", "--microbatch-intake", "--vllm-pool",
                 "--burst-ttft-unweighted"):
        assert bench.main(["--leave-one-source-out", flag, "--write"]) == 2
        assert f"{flag}: an experiment simulate does not run" in capsys.readouterr().err
    assert not bench.EOS["stop"] and not bench.MICROBATCH["on"] and not bench.BURST["out"]


def test_the_burst_experiment_unweights_only_a_bursts_ttft_and_only_when_asked() -> None:
    """--burst-ttft-unweighted (measured, not adopted: docs/vllm-latency.md): the TTFT of a
    run that sends every prompt at once is marked as a backlog (weight 0 in the fit) only
    with the flag; its throughput and TPOT, and a closed loop's TTFT, never are."""
    cases = sys.modules["vllm_cases"]
    burst = next(c for c in CASES if c.name == "gpustack_vllm011_qwen3:h100-qwen3-14b-sharegpt")
    loop = next(c for c in CASES if c.name == "wmx_vllm023_l4:l4-qwen25-05b-c32")
    assert cases.burst(burst) and not cases.burst(loop)

    def unweighted(case, entry) -> set[str]:
        return {r["metric"] for r in cases.compare(case, entry) if r["backlog"]}

    entries = {c.name: bench.predict(c) for c in (burst, loop)}
    assert not bench.BURST["out"] and unweighted(burst, entries[burst.name]) == set()
    bench.BURST["out"] = True
    try:
        assert unweighted(burst, entries[burst.name]) == {"median_ttft_ms"}
        assert unweighted(loop, entries[loop.name]) == set()
    finally:
        bench.BURST["out"] = False


def test_the_vllm_pool_experiment_schedules_in_the_pool_plan_gives_that_release() -> None:
    """--vllm-pool (measured, not adopted: docs/vllm-latency.md): a run schedules in the
    blocks `servecap plan --engine vllm==<its release>` gives (vLLM's profile and
    gpu_memory_utilization) in place of the plain ledger's; off by default."""
    import json
    import subprocess

    cases = sys.modules["vllm_cases"]
    run = next(c for c in CASES if c.name == "gpustack_vllm011_qwen3:h100-qwen3-14b-sharegpt")
    assert not bench.VLLM_POOL["on"]
    plain = cases.setup_for(run).num_blocks
    bench.VLLM_POOL["on"] = True
    try:
        pooled = cases.setup_for(run).num_blocks
    finally:
        bench.VLLM_POOL["on"] = False
    assert cases.setup_for(run).num_blocks == plain  # off again: the ledger's pool
    planned = json.loads(subprocess.run(
        [sys.executable, "-m", "servecap.cli", "plan", str(ROOT / run.group["model"]["servecap"]),
         "--device", "h100-80gb", "--engine", "vllm==0.11.0", "--json"],
        capture_output=True, text=True, check=True).stdout)
    # vLLM's own pool for the release: fewer blocks than device - weights - peak - safety
    assert pooled < plain
    assert pooled * 16 == planned["kv_cache_tokens"]
