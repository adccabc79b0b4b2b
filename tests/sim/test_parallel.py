"""Tensor and pipeline parallelism in the simulator: plan's own per-rank ledger, collectives."""

import json
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from servecap.cli.app import app
from servecap.cli.sim_inputs import SimFlags, device_coefficients, rank_for
from servecap.sim.step_model import experts_touched_share, ring_allreduce_s, step_s

RUN = CliRunner()


def _json(*args):
    result = RUN.invoke(app, list(args))
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def test_70b_on_four_h100s_simulates_on_the_memory_plan_prints(tmp_path):
    """`simulate -tp 4` sizes its pool from the same binding-rank ledger as `plan -tp 4`."""
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0,1000,50\n0.1,200,20\n")
    plan = _json("plan", "llama-3.1-70b-instruct", "--device", "h100-80gb", "-tp", "4",
                 "--json")
    sim = _json("simulate", "llama-3.1-70b-instruct", "--device", "h100-80gb", "-tp", "4",
                "--trace", str(trace), "--json")
    assert sim["policies"][0]["completed"] == 2
    memory = sim["memory"]
    for key in ("weights_bytes", "runtime_peak_bytes", "safety_bytes", "device_bytes",
                "committed_bytes", "kv_bytes_per_token"):
        assert memory[key] == plan[key], key
    assert memory["tensor_parallel_size"] == plan["tensor_parallel_size"] == 4
    ranked = rank_for("llama-3.1-70b-instruct", SimFlags(device="h100-80gb",
                                                          tensor_parallel_size=4))
    assert sim["kv_pool"]["pool_bytes"] == ranked.plan.device_bytes - ranked.plan.fixed_bytes
    assert sim["coefficients"]["weights_bytes"] == ranked.plan.line("weights") \
        + ranked.plan.line("weight_metadata")
    assert sim["coefficients"]["weights_bytes"] == plan["weights_bytes"] \
        + plan["weight_metadata_bytes"]


def _coef(tp, pp=1, device="h100-80gb", model="llama-3.1-8b", **extra):
    flags = SimFlags(device=device, tensor_parallel_size=tp, pipeline_parallel_size=pp,
                     **extra)
    return device_coefficients(rank_for(model, flags), flags)


@pytest.mark.parametrize("tp", [2, 4, 8])
@pytest.mark.parametrize("shape", [(2048, 0, 0), (0, 1, 2048), (0, 64, 64 * 1024)])
def test_tensor_parallel_never_beats_ideal_scaling_and_pays_collectives(tp, shape):
    """TTFT-like (a 2,048-token prefill) and TPOT-like (decode at 1 and 64 sequences) steps
    at TP n take at least 1/n of TP 1's, and the all-reduce time is in them (plain: a
    release's host time, overlapped under async scheduling, can hide a small step's)."""
    prefill, decode, context = shape
    pairs = prefill * (prefill + 1) // 2
    one = step_s(_coef(1, engine="plain"), prefill, decode, pairs, context)
    coef = _coef(tp, engine="plain")
    many = step_s(coef, prefill, decode, pairs, context)
    assert many >= one / tp
    measured = coef.collective_table != ""
    assert measured == (tp == 4)  # the one H100 GPU count a published table measured
    assert (coef.collective_calls > 0) == measured
    assert (coef.collective_latency_s > 0 and coef.collective_bytes_per_token > 0) != measured
    no_links = step_s(coef.__class__(**{**coef.__dict__, "collective_bytes_per_token": 0.0,
                                         "collective_latency_s": 0.0, "collective_calls": 0}),
                      prefill, decode, pairs, context)
    assert many > no_links


def test_pipeline_stages_run_in_turn():
    """Two stages of 16 layers: a step takes both stages' time plus the hop."""
    one, two = _coef(1), _coef(1, pp=2)
    assert two.pipeline_parallel_size == 2 and two.num_layers == 16
    assert step_s(two, 0, 8, 0, 8000) > step_s(one, 0, 8, 0, 8000)


def test_ring_allreduce_follows_the_ring_formula():
    """2(n-1)/n x bytes / bandwidth + 2(n-1) x latency."""
    assert ring_allreduce_s(1e6, 4, 1e11, 1e-6) == pytest.approx(1.5e6 / 1e11 + 6e-6)
    assert ring_allreduce_s(1e6, 1, 1e11, 1e-6) == 0.0


def test_moe_reads_only_the_experts_a_batch_touches():
    """Qwen3-30B-A3B: 128 experts, 8 per token; one token touches 1/16 of them, a large
    batch nearly all; a single stream's step is far cheaper than reading every expert."""
    assert experts_touched_share(1, 128, 8) == pytest.approx(8 / 128)
    assert experts_touched_share(256, 128, 8) > 0.99
    coef = _coef(1, model="qwen3-30b-a3b")
    assert coef.num_experts == 128 and coef.moe_expert_bytes > coef.weights_bytes // 2
    assert 0 < coef.moe_flops_per_token < coef.flops_per_token
    assert coef.moe_gemm_efficiency < coef.gemm_efficiency  # grouped expert GEMMs, measured
    whole = coef.weights_bytes / coef.bandwidth_bytes_per_s
    assert step_s(coef, 0, 1, 0, 1000) < 0.5 * whole


def test_fp8_weights_run_gemms_at_the_fp8_rate():
    """H100: GEMMs at 1,978.9 TFLOPS FP8; attention stays at the BF16 989.4."""
    coef = _coef(1, weight_dtype="fp8")
    assert (coef.flops_per_s, coef.attention_flops_per_s) == (1_978_900e9, 989_400e9)
    assert coef.gemm_efficiency < _coef(1).gemm_efficiency  # FP8's own measured share


def test_speed_of_light_is_labelled_and_available():
    coef = _coef(1, speed_of_light=True)
    assert "speed of light" in coef.efficiency_source
    assert (coef.gemm_efficiency, coef.bandwidth_efficiency, coef.layer_overhead_s) == \
        (1.0, 1.0, 0.0)


def test_measured_efficiency_tables_state_their_source_and_slow_the_roofline():
    """H100, H200 and A100 ship fitted tables (aiconfigurator-core's measured kernels); the
    default step is slower than speed of light, and says where its factors come from."""
    from servecap.sim.efficiency import load_tables

    tables = load_tables()
    assert "aiconfigurator-core 0.12.0" in tables["source"]
    assert {"h100-80gb", "h200-141gb", "a100-80gb"} <= set(tables["devices"])
    measured, light = _coef(1), _coef(1, speed_of_light=True)
    assert "aiconfigurator" in measured.efficiency_source
    assert 0 < measured.gemm_efficiency < 1 and measured.layer_overhead_s > 0
    assert step_s(measured, 0, 8, 0, 8000) > step_s(light, 0, 8, 0, 8000)


def test_speculate_and_sweep_take_the_parallel_sizes():
    spec = _json("speculate", "llama-3.1-70b-instruct", "--draft", "llama-3.2-1b-instruct",
                 "--device", "h100-80gb", "-tp", "4", "--batches", "1,64", "--json")
    assert [r["batch"] for r in spec["rows"]] == [1, 64] and spec["rows"][0]["speedup"] > 1
    sweep = _json("sweep", "llama-3.1-8b", "--device", "h100-80gb", "-pp", "2",
                  "--workload", "workloads/chat.yaml", "--num-rates", "2", "--json")
    assert sweep["memory"]["pipeline_parallel_size"] == 2
    assert sweep["coefficients"]["pipeline_latency_s"] > 0


@pytest.mark.parametrize("engine", ["plain", None])
@pytest.mark.parametrize("model", ["llama-3.1-8b", "qwen3-30b-a3b"])
def test_simulated_ttft_and_tpot_at_tp_2_4_8_never_beat_ideal_scaling(model, engine):
    """Whole simulations (static batch of 8 requests, 2,048-token prompts, 64 outputs): TP n's
    TTFT and TPOT are at least TP 1's divided by n, on the step model alone (plain) and with
    the default release's host terms. The API server's serial queue is left out: it spaces
    the arrivals by a time TP does not shrink, which changes which requests share a prefill,
    so a median TTFT can beat 1/n (qwen3-30b-a3b: 84.9 ms at TP 2 against 192.8 ms at TP 1)."""
    from servecap.sim.config import SchedulerConfig
    from servecap.sim.metrics import summarize
    from servecap.sim.run import simulate
    from servecap.sim.sampling import Request

    reqs = [Request(i, 0.0, 2048, 64) for i in range(8)]

    def run(tp):
        coef = replace(_coef(tp, model=model, engine=engine), frontend_s=0.0)
        res = simulate(reqs, coef, SchedulerConfig(), 100_000)
        s = summarize([res])
        return s["ttft_ms"]["p50"], s["tpot_ms"]["p50"]

    ttft1, tpot1 = run(1)
    for tp in (2, 4, 8):
        ttft, tpot = run(tp)
        assert ttft >= ttft1 / tp and tpot >= tpot1 / tp, tp


def test_expert_parallel_trades_the_moe_all_reduce_for_an_all_to_all():
    """Qwen3-30B-A3B (48 MoE layers): with --enable-expert-parallel every MoE layer sends
    each token's 8 top-k activations out and back instead of one all-reduce, so the per-token
    link bytes grow (at -tp 2, priced by the ring estimate throughout); at -tp 4 on H100s the
    measured table prices the all-reduces left (48 instead of 96) and the all-to-all stays an
    estimate; a dense model is refused."""
    tp = _coef(2, model="qwen3-30b-a3b")
    ep = _coef(2, model="qwen3-30b-a3b", expert_parallel=True)
    assert ep.expert_parallel_size == 2 and tp.expert_parallel_size == 1
    assert ep.collective_bytes_per_token == pytest.approx(
        tp.collective_bytes_per_token * (48 + 48 * 8) / (2 * 48))
    tp4 = _coef(4, model="qwen3-30b-a3b")
    ep4 = _coef(4, model="qwen3-30b-a3b", expert_parallel=True)
    assert (tp4.collective_calls, ep4.collective_calls) == (96, 48)
    assert tp4.collective_bytes_per_token == 0
    assert ep4.collective_bytes_per_token == pytest.approx(48 * 2 * 8 * 3 / 4 * 2048 * 2)
    from servecap.ledger.errors import SpecError
    with pytest.raises(SpecError, match="mixture-of-experts"):
        _coef(4, expert_parallel=True)


@pytest.mark.parametrize(("args", "needle"), [
    (["--device", "80GiB", "--bandwidth", "2000GB/s", "--flops", "990TFLOPS", "-tp", "2"],
     "interconnect"),
    (["--device", "h100-80gb", "--step-time-cv", "-1"], "--step-time-cv"),
    (["--device", "h100-80gb", "-tp", "3"], "--tensor-parallel-size"),
])
def test_parallel_and_spread_flags_refuse_what_cannot_be_priced(args, needle):
    out = RUN.invoke(app, ["simulate", "llama-3.1-8b", "--workload", "workloads/chat.yaml",
                           *args])
    assert out.exit_code == 2 and needle in out.output, out.output


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
@pytest.mark.parametrize("tokens", [1, 32, 64, 512, 2048])
def test_the_collective_term_prices_the_steps_real_message(tp, tokens):
    """Llama-3.1-8B (32 layers, hidden 4,096) on H100s: two all-reduces per layer of
    tokens x 4,096 x 2 bytes. At TP 4 each costs what vLLM PR #24111 measured for that size
    (ledger/collectives.py); at TP 2 and 8, with no table, the ring estimate of the same
    message: 2(n-1)/n x bytes / link + 2(n-1) x 1.5 us; at TP 1 nothing."""
    from servecap.ledger.collectives import allreduce_s
    from servecap.ledger.devices import find
    from servecap.sim.step_model import collective_s, terms

    coef = _coef(tp)
    message = tokens * 4096 * 2
    got = collective_s(coef, tokens)
    assert terms(coef, 0, tokens, 0, 0)["collective_s"] == got
    if tp == 1:
        assert got == 0.0 and coef.collective_source == ""
    elif tp == 4:
        assert coef.collective_calls == 64 and coef.collective_message_bytes_per_token == 8192
        assert got == pytest.approx(64 * allreduce_s(coef.collective_table, message))
        assert coef.collective_source.startswith("measured: vLLM PR #24111")
    else:
        device = find("h100-80gb")
        ring = ring_allreduce_s(message, tp, device.interconnect_bytes_per_s,
                                device.interconnect_latency_s)
        assert got == pytest.approx(64 * ring, rel=1e-9)
        assert coef.collective_source.startswith(
            f"estimate: no measured all-reduce table for h100-80gb at tp {tp}")


def test_measured_all_reduces_take_the_published_microseconds():
    """At TP 4 a decode step of 32 Llama-3.1-8B sequences sends 256 KiB per all-reduce (the
    one-stage kernel, at most its 10 us at 0.5 MiB) and one of 64 sends 512 KiB (the
    two-stage kernel: 17 us): 64 all-reduces each."""
    from servecap.sim.step_model import collective_s

    coef = _coef(4)
    assert collective_s(coef, 32) == pytest.approx(64 * 10e-6)
    assert collective_s(coef, 64) == pytest.approx(64 * 17e-6)


def test_the_simulators_hot_path_prices_measured_all_reduces_as_step_s_does():
    """The decode loop inlines a dense model's step; with a measured table its times are the
    ones step_s gives (the same run through step_s: async scheduling with no host cost)."""
    from dataclasses import replace

    from servecap.sim.config import SchedulerConfig
    from servecap.sim.metrics import summarize
    from servecap.sim.run import simulate
    from servecap.sim.sampling import Request

    coef = _coef(4, engine="plain")  # no host cost: overlap changes nothing
    reqs = [Request(i, 0.01 * i, 300 + 7 * i, 40 + i) for i in range(48)]
    fast = simulate(reqs, coef, SchedulerConfig(), 100_000)
    slow = simulate(reqs, replace(coef, cpu_overlap=1.0), SchedulerConfig(), 100_000)
    assert fast.decode_end_s == pytest.approx(slow.decode_end_s, rel=1e-9)
    assert summarize([fast])["tpot_ms"]["p50"] > summarize(
        [simulate(reqs, replace(coef, collective_calls=0), SchedulerConfig(), 100_000)]
    )["tpot_ms"]["p50"]


def test_simulate_says_which_all_reduces_are_measured_and_which_estimated(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0,100,5\n")
    for tp, needle in ((4, "measured: vLLM PR #24111"),
                       (2, "estimate: no measured all-reduce table for h100-80gb at tp 2")):
        args = ["simulate", "llama-3.1-8b", "--device", "h100-80gb", "-tp", str(tp),
                "--trace", str(trace)]
        assert _json(*args, "--json")["coefficients"]["collective_source"].startswith(needle)
        screen = RUN.invoke(app, args, env={"COLUMNS": "200"}).output
        assert "collectives: " in screen and needle in screen
