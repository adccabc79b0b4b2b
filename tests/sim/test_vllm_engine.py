"""The vLLM engine terms (sim/vllm_engine.py): multi-step groups hold new prompts back, the
host's cost per step and sequence, CUDA-graph coverage, async overlap; --engine's flags."""

import json
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from servecap.cli.app import app
from servecap.ledger.vllm_versions import NEWEST, choose
from servecap.sim.cluster import simulate_replicas
from servecap.sim.config import SchedulerConfig
from servecap.sim.roofline import Coefficients
from servecap.sim.run import simulate
from servecap.sim.sampling import Request
from servecap.sim.step_model import decode_pricer, stage_s, step_s, terms
from servecap.sim.vllm_engine import FITTED, V0_GRAPH_MAX, V1_GRAPH_MAX, engine_terms

# the fitted terms (sim/engine_fit.json) where a test checks they are wired through; the
# mechanism tests below use round values of their own, whatever the fit chose
EAGER_LAYER_S, V1_CPU_STEP_S = FITTED["EAGER_LAYER_S"], FITTED["V1_CPU_STEP_S"]
V1_CPU_PER_SEQ_S, FITTED_FRONTEND_S = FITTED["V1_CPU_PER_SEQ_S"], FITTED["FRONTEND_S"]
V0_CPU_PER_SEQ_S = FITTED["V0_CPU_PER_SEQ_S"] + FITTED["V0_OUTPUT_PER_SEQ_S"]  # one step
FITTED_LATENCY_S = FITTED["V1_FRONTEND_LATENCY_S"]
FRONTEND_S, V1_FRONTEND_LATENCY_S = 0.01, 0.02

COEF = Coefficients(weights_bytes=16_000_000_000, kv_bytes_per_token=131_072,
                    flops_per_token=16_000_000_000, bandwidth_bytes_per_s=3.35e12,
                    flops_per_s=989e12, num_layers=32)
V0 = replace(COEF, **engine_terms(choose("vllm==0.6.3").row).coefficients())


def test_v0_and_v1_rows_carry_their_terms() -> None:
    v0, v1 = engine_terms(choose("vllm==0.6.3").row), engine_terms(choose("vllm").row)
    assert (v0.cpu_per_seq_s, v0.graph_max_tokens, v0.graph_prefill) == \
        (V0_CPU_PER_SEQ_S, V0_GRAPH_MAX, 0.0)
    assert (v1.cpu_per_seq_s, v1.graph_max_tokens, v1.graph_prefill) == \
        (V1_CPU_PER_SEQ_S, V1_GRAPH_MAX, 1.0)
    assert (v0.cpu_step_s, v1.cpu_step_s) == (0.0, V1_CPU_STEP_S)
    assert (v0.eager_layer_s, v1.eager_layer_s) == (EAGER_LAYER_S, 0.0)  # V1 compiles
    eager = engine_terms(choose("vllm").row, enforce_eager=True)
    assert (eager.graph_max_tokens, eager.eager_layer_s) == (0, EAGER_LAYER_S)
    assert engine_terms(choose("vllm").row, async_scheduling=True).cpu_overlap == 1.0
    assert "fitted" in v0.source and "v0.6.3" in v0.source


def test_v0_multi_step_spreads_its_per_round_host_work_over_the_group() -> None:
    """cpu_per_seq_s = V0_CPU_PER_SEQ_S / K + V0_OUTPUT_PER_SEQ_S: scheduling and input
    preparation once per K steps, output processing every step."""
    from servecap.sim.vllm_engine import Release
    row = choose("vllm==0.6.3").row
    for k in (1, 4, 10):
        terms = engine_terms(row, release=Release(num_scheduler_steps=k))
        assert terms.cpu_per_seq_s == pytest.approx(
            FITTED["V0_CPU_PER_SEQ_S"] / k + FITTED["V0_OUTPUT_PER_SEQ_S"])


def test_v0_prefills_run_eager_and_decodes_only_above_the_largest_graph() -> None:
    eager = EAGER_LAYER_S * COEF.num_layers
    assert terms(V0, 512, 0, 0, 0)["eager_s"] == pytest.approx(eager)
    assert terms(V0, 0, V0_GRAPH_MAX, 0, 0)["eager_s"] == 0.0
    assert terms(V0, 0, V0_GRAPH_MAX + 1, 0, 0)["eager_s"] == pytest.approx(eager)
    assert terms(COEF, 512, 0, 0, 0)["eager_s"] == 0.0  # no engine, no eager cost


def test_the_host_cost_adds_per_sequence_and_hides_under_async_scheduling() -> None:
    parts = terms(V0, 0, 100, 0, 100_000)
    assert parts["cpu_s"] == pytest.approx(100 * V0_CPU_PER_SEQ_S)
    v1 = replace(COEF, **engine_terms(choose("vllm").row).coefficients())
    # V1's host time grows with the running batch: 256 decodes cost 256 x the fitted
    # per-sequence time more than one step's fixed time
    for n in (1, 8, 256):
        assert terms(v1, 0, n, 0, n * 1000)["cpu_s"] == \
            pytest.approx(V1_CPU_STEP_S + n * V1_CPU_PER_SEQ_S)
    # a prefilling request counts once, beside the decodes
    assert terms(v1, 512, 8, 0, 8000)["cpu_s"] == \
        pytest.approx(V1_CPU_STEP_S + 9 * V1_CPU_PER_SEQ_S)
    gpu = stage_s(parts | {"cpu_s": 0.0})
    assert stage_s(parts) == pytest.approx(gpu + parts["cpu_s"])
    assert stage_s(parts, cpu_overlap=1.0) == pytest.approx(max(gpu, parts["cpu_s"]))


@given(st.integers(1, 1024), st.integers(0, 2_000_000), st.booleans(),
       st.sampled_from(["vllm==0.6.3", "vllm"]))
def test_the_folded_decode_price_is_step_s(n, live, enforce_eager, engine) -> None:
    coef = replace(COEF, **engine_terms(choose(engine).row, enforce_eager).coefficients())
    assert decode_pricer(coef)(n, live) == pytest.approx(step_s(coef, 0, n, 0, live))


def _ttft_of_late_prompt(steps: int, arrival_s: float) -> float:
    """A long decode is running when a second prompt arrives."""
    reqs = [Request(0, 0.0, 64, 400), Request(1, arrival_s, 64, 8)]
    cfg = SchedulerConfig(policy="prefill-priority", num_scheduler_steps=steps)
    seq = simulate(reqs, V0, cfg, 10_000).seqs[1]
    return seq.prefill_end_s - seq.req.arrival_s


def test_multi_step_holds_a_new_prompt_until_the_group_ends() -> None:
    arrivals = [0.05 + 0.0031 * i for i in range(40)]  # spread over several groups
    waits = [_ttft_of_late_prompt(10, t) - _ttft_of_late_prompt(1, t) for t in arrivals]
    decode = step_s(V0, 0, 1, 0, 100)
    assert all(-1e-9 <= w <= 10 * decode for w in waits)  # never past one group
    assert 3 * decode < sum(waits) / len(waits) < 7 * decode  # about half a group on average


def _run(*args) -> object:
    return CliRunner().invoke(app, ["simulate", "llama-3.1-8b", "--device", "h100-80gb",
                                    "--input-len", "128", "--output-len", "16", "--rate", "2",
                                    "--num-requests", "20", *args])


@pytest.mark.parametrize(("args", "needle"), [
    (["--num-scheduler-steps", "10"], f"{NEWEST.pin} (the default) is V1"),
    (["--engine", "plain", "--num-scheduler-steps", "10"], "--num-scheduler-steps = True: "
     "needs a vLLM release"),
    (["--engine", "plain", "--enforce-eager"], "--enforce-eager = True: needs a vLLM release"),
    (["--speed-of-light", "--async-scheduling"], "--async-scheduling = True: needs a vLLM"),
    (["--engine", "vllm==0.11", "--num-scheduler-steps", "8"], "V0 only"),
    (["--engine", "vllm==0.6.3", "--async-scheduling"], "V1 only"),
    (["--engine", "tgi"], "--engine = 'tgi': allowed: vllm (the newest release known), "
     "vllm==X.Y, vllm>=X.Y, or plain"),
    (["--engine", "none"], "or plain"),
])
def test_engine_flags_refuse_what_the_release_lacks(args, needle) -> None:
    out = _run(*args)
    assert out.exit_code == 2 and "Traceback" not in out.output
    assert len(out.output.strip().splitlines()) == 1 and needle in out.output, out.output


def test_engine_terms_are_printed_and_pick_the_release_scheduler() -> None:
    plain, v0 = (json.loads(_run(*a, "--json").output) for a in
                 (["--engine", "plain"], ["--engine", "vllm==0.6.3", "--num-scheduler-steps",
                                          "4"]))
    coef = v0["coefficients"]
    assert coef["cpu_per_seq_s"] == pytest.approx(
        FITTED["V0_CPU_PER_SEQ_S"] / 4 + FITTED["V0_OUTPUT_PER_SEQ_S"])  # 4 scheduler steps
    assert coef["graph_prefill"] == 0.0
    assert "engine vllm==0.6.3" in coef["source"]
    assert v0["engine"] == {"simulated": "vllm==0.6.3", "given": "vllm==0.6.3",
                            "default": False, "about": v0["engine"]["about"],
                            "host_gpu_overlap": False,
                            "overlap_why": v0["engine"]["overlap_why"]}
    assert "V0 has no async scheduling" in v0["engine"]["overlap_why"]
    assert v0["policies"][0]["policy"] == "prefill-priority"
    assert plain["policies"][0]["policy"] == "continuous"
    assert plain["coefficients"]["cpu_per_seq_s"] == 0.0
    assert "engine " not in plain["coefficients"]["source"]
    assert v0["step_terms"]["prefill_1024_tokens"]["eager_s"] > 0
    assert v0["policies"][0]["ttft_ms"]["p50"] > plain["policies"][0]["ttft_ms"]["p50"]


def test_the_default_is_the_newest_release_and_says_so() -> None:
    """No --engine: the newest row's V1 terms, its chunked scheduler, labelled as the default
    in --json and on screen; --engine vllm (spelled out) is the same run, not labelled so."""
    default, spelled = (json.loads(_run(*a, "--json").output) for a in ([], ["--engine",
                                                                           "vllm"]))
    assert default["engine"]["simulated"] == NEWEST.pin and default["engine"]["default"]
    assert default["engine"]["given"] is None and "default" in default["engine"]["about"]
    assert not spelled["engine"]["default"] and spelled["engine"]["given"] == "vllm"
    coef = default["coefficients"]
    assert coef["cpu_step_s"] == V1_CPU_STEP_S and coef["frontend_s"] == FITTED_FRONTEND_S
    assert coef["graph_max_tokens"] == V1_GRAPH_MAX and f"engine {NEWEST.pin}" in coef["source"]
    assert default["policies"][0]["policy"] == "chunked-prefill"
    assert default["coefficients"] == spelled["coefficients"]
    assert default["policies"][0]["ttft_ms"] == spelled["policies"][0]["ttft_ms"]
    assert coef["cpu_per_seq_s"] == V1_CPU_PER_SEQ_S
    host = default["step_terms"]["decode_1_seq_at_1024"]["cpu_s"]
    assert host == pytest.approx(V1_CPU_STEP_S + V1_CPU_PER_SEQ_S)
    screen = _run().output
    assert f"engine: {NEWEST.pin} (default: the newest vLLM release known" in " ".join(
        screen.split())


@pytest.mark.parametrize(("args", "why"), [(["--speed-of-light"], "--speed-of-light"),
                                           (["--coefficients", "COEF"], "coefficients file")])
def test_speed_of_light_and_a_coefficients_file_default_to_plain(args, why, tmp_path) -> None:
    """Both describe a step model of their own (no overheads; a measured one, its host time
    inside): the default adds no release's terms on top, and says why; --engine adds them."""
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"step_overhead_s": 0.002}))
    args = [str(path) if a == "COEF" else a for a in args]
    alone, pinned = (json.loads(_run(*args, *extra, "--json").output) for extra in
                     ([], ["--engine", "vllm==0.6.3"]))
    assert alone["engine"]["simulated"] == "plain" and alone["engine"]["default"]
    assert why in alone["engine"]["about"]
    assert alone["coefficients"]["cpu_step_s"] == alone["coefficients"]["frontend_s"] == 0
    assert alone["policies"][0]["policy"] == "continuous"
    assert pinned["coefficients"]["cpu_per_seq_s"] == V0_CPU_PER_SEQ_S


def test_enforce_eager_alone_runs_the_default_release_without_graphs() -> None:
    eager = json.loads(_run("--enforce-eager", "--json").output)["coefficients"]
    assert eager["eager_layer_s"] == EAGER_LAYER_S and eager["graph_max_tokens"] == 0


def test_the_front_end_delays_each_request_by_its_time() -> None:
    reqs = [Request(0, 0.5, 64, 8)]
    cfg = SchedulerConfig(policy="prefill-priority")
    base = simulate(reqs, COEF, cfg, 10_000).seqs[0]
    late = simulate(reqs, replace(COEF, frontend_s=FRONTEND_S), cfg, 10_000).seqs[0]
    assert late.first_token_s - base.first_token_s == pytest.approx(FRONTEND_S)
    assert engine_terms(choose("vllm").row).frontend_s == FITTED_FRONTEND_S


def test_a_burst_queues_at_the_front_end_one_request_at_a_time() -> None:
    reqs = [Request(i, 0.0, 16, 2) for i in range(20)]
    cfg = SchedulerConfig(policy="prefill-priority")
    seqs = simulate(reqs, replace(COEF, frontend_s=FRONTEND_S), cfg, 10_000).seqs
    firsts = sorted(s.first_token_s for s in seqs)
    assert firsts[-1] >= 20 * FRONTEND_S  # the last waited for the other 19
    assert all(b - a >= FRONTEND_S * 0.999 for a, b in zip(firsts, firsts[1:], strict=False))


def test_a_closed_loop_and_replicas_pass_the_front_end_once_per_request() -> None:
    coef = replace(COEF, frontend_s=FRONTEND_S)
    reqs = [Request(i, 100.0 * i, 16, 2) for i in range(6)]  # offered times are ignored
    closed = simulate(reqs, coef, SchedulerConfig(policy="prefill-priority", concurrency=1),
                      10_000).seqs
    bare = simulate(reqs, COEF, SchedulerConfig(policy="prefill-priority", concurrency=1),
                    10_000).seqs
    for with_fe, without in zip(closed, bare, strict=True):
        assert with_fe.first_token_s - with_fe.req.arrival_s == pytest.approx(
            without.first_token_s - without.req.arrival_s + FRONTEND_S)
    routed = simulate_replicas(reqs, coef, SchedulerConfig(policy="prefill-priority"),
                               10_000, 2, "round-robin")
    seqs = [s for r in routed for s in r.seqs]
    assert all(s.first_token_s - s.req.arrival_s > FRONTEND_S for s in seqs)


def test_v1_pays_a_front_end_latency_v0_keeps_it_inside_its_fitted_time() -> None:
    """V1 (the API server in its own process, ZMQ to the engine core) carries the fitted
    latency; V0's is inside its serial time; both print it."""
    v1, v0 = engine_terms(choose("vllm").row), engine_terms(choose("vllm==0.6.3").row)
    assert v1.frontend_latency_s == FITTED_LATENCY_S and v0.frontend_latency_s == 0
    assert v1.frontend_s == v0.frontend_s == FITTED_FRONTEND_S
    assert "latency" in v1.source and "API server" in v1.source
    report = json.loads(_run("--json").output)
    assert report["coefficients"]["frontend_latency_s"] == FITTED_LATENCY_S
    assert f"{FITTED_LATENCY_S * 1000:g} ms latency" in " ".join(_run().output.split())


def test_a_request_pays_the_front_end_latency_once_in_its_ttft_and_its_e2e() -> None:
    """A lone request: its first token and its last both come the latency later, so TTFT and
    end-to-end latency grow by it once and the gaps between its tokens do not change."""
    reqs = [Request(0, 0.5, 64, 8)]
    cfg = SchedulerConfig(policy="prefill-priority")
    base = simulate(reqs, replace(COEF, frontend_s=FRONTEND_S), cfg, 10_000).seqs[0]
    late = simulate(reqs, replace(COEF, frontend_s=FRONTEND_S,
                                  frontend_latency_s=V1_FRONTEND_LATENCY_S), cfg,
                    10_000).seqs[0]
    assert late.first_token_s - base.first_token_s == pytest.approx(V1_FRONTEND_LATENCY_S)
    assert late.release_s - base.release_s == pytest.approx(V1_FRONTEND_LATENCY_S)
    assert late.last_token_s - late.first_token_s == pytest.approx(
        base.last_token_s - base.first_token_s)


def test_the_front_end_latency_holds_no_one_up_and_a_burst_still_queues_on_the_serial_time(
) -> None:
    """20 requests at once: the latency alone shifts every first token by the same amount
    (no queue forms on it), and with the serial time beside it the burst still passes one
    request per frontend_s: the last first token comes about 20 x frontend_s + the latency,
    not 20 x (frontend_s + latency)."""
    reqs = [Request(i, 0.0, 16, 2) for i in range(20)]
    cfg = SchedulerConfig(policy="prefill-priority")
    bare = sorted(s.first_token_s for s in simulate(reqs, COEF, cfg, 10_000).seqs)
    only = sorted(s.first_token_s for s in simulate(
        reqs, replace(COEF, frontend_latency_s=V1_FRONTEND_LATENCY_S), cfg, 10_000).seqs)
    assert [b - a for a, b in zip(bare, only, strict=True)] == pytest.approx(
        [V1_FRONTEND_LATENCY_S] * 20)
    both = sorted(s.first_token_s for s in simulate(
        reqs, replace(COEF, frontend_s=FRONTEND_S, frontend_latency_s=V1_FRONTEND_LATENCY_S),
        cfg, 10_000).seqs)
    assert all(b - a >= FRONTEND_S * 0.999 for a, b in zip(both, both[1:], strict=False))
    assert 20 * FRONTEND_S + V1_FRONTEND_LATENCY_S <= both[-1] \
        < 20 * (FRONTEND_S + V1_FRONTEND_LATENCY_S)


def test_a_closed_loop_pays_the_front_end_latency_once_per_request() -> None:
    """One request at a time: each one's TTFT is the bare engine's plus the serial time and
    the latency, once (the next is sent when the last token is seen)."""
    coef = replace(COEF, frontend_s=FRONTEND_S, frontend_latency_s=V1_FRONTEND_LATENCY_S)
    reqs = [Request(i, 100.0 * i, 16, 2) for i in range(6)]
    cfg = SchedulerConfig(policy="prefill-priority", concurrency=1)
    closed, bare = (simulate(reqs, c, cfg, 10_000).seqs for c in (coef, COEF))
    for with_fe, without in zip(closed, bare, strict=True):
        assert with_fe.first_token_s - with_fe.req.arrival_s == pytest.approx(
            without.first_token_s - without.req.arrival_s + FRONTEND_S
            + V1_FRONTEND_LATENCY_S)
        assert with_fe.release_s - with_fe.req.arrival_s == pytest.approx(
            without.release_s - without.req.arrival_s + FRONTEND_S + V1_FRONTEND_LATENCY_S)
