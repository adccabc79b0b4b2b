"""The regression set: real vLLM startup logs (tests/fixtures/vllm_logs, each with a sidecar
naming its source, release, GPU, flags and config) planned from the config and the logged
flags alone. Known misses are strict xfails carrying their figure, so a fix flips them, and
the rates over the whole planned set are asserted as measured."""

import importlib.util
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from servecap.cli.app import app
from servecap.cli.inputs import deployment_from_flags
from servecap.ledger.vllm_log import MEMORY_WORDS, parse_vllm_log

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / "tests" / "fixtures" / "vllm_logs"
CONFIGS = ROOT / "tests" / "fixtures" / "configs"
_spec = importlib.util.spec_from_file_location("vllm_logs", ROOT / "bench" / "vllm_logs.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

# Misses, with the figure bench/vllm_logs.py prints for them (no constant is tuned to a log).
# Outside 10%:
KV_MISSES = {
    "v1_llama31_8b_l40s_pr17122": "+20.5%: 0.8's V1 profile counts every byte in use on the "
                                  "device (other processes too, until 0.9.2) and this release "
                                  "prints no line that breaks its 4 GiB down",
    "v0_27_qwen3_32b_2xrtxpro6000_pp2_kubesimplify": "+11.2%: PP0 logged a 6.92 GiB pool "
                                                     "against the plan's 8.18 (PP1's, 7.69 "
                                                     "with its sampler's penalties state, "
                                                     "binds the plan); cold compile planned; "
                                                     "the excerpt does not break PP0's 1.31 GiB "
                                                     "down (FlashInfer's JIT kernels on SM 12.0 "
                                                     "as non-torch, vllm#49892)",
    "v0_27_qwen25_7b_rtx4090_llmso": "+31.7%: a 5.48 GiB pool against the plan's 7.21; the "
                                     "excerpt prints only the token line, and the notes do "
                                     "not say whether the compile was cold",
    "v0_28_qwen3_8b_rtx4090_cold_slolab": "+92.7%: the cold compile is planned (1.17 GiB "
                                          "against the log's 1.18), but 16.95 GiB consumed "
                                          "(weights + non-torch) by the log's own line against "
                                          "15.4 on the warm start of the same cell (-3.6%): a "
                                          "desktop-shared RTX 4090 (WSL2)",
    "v0_29_qwen3_4b_rtx5060ti_wsl2_cold_prp": "+31.8%: 8.59 GiB consumed (weights + non-torch) "
                                              "by the log's own line, 0.95 beyond the 7.64 "
                                              "loaded against the plan's 0.40: the device-wide "
                                              "free-memory drop on a desktop-shared RTX 5060 Ti "
                                              "(WSL2), cold; 7.89 on the warm 0.30.0 start",
    "v0_19_qwen3_0p6b_8k_rtx3060_failed_retriva": "-14.9%: an 8.03 GiB pool above the 7.60 "
                                                  "GiB that 0.75 x 11.63 GiB less the weights "
                                                  "leaves; 0.19 counts non-torch memory "
                                                  "device-wide, so the desktop's released "
                                                  "memory enlarged it (no line breaks it down)",
    "v0_6_4_qwen25_7b_24gib_wsl_m2a": "+41.1%: the log's own profile line counts 1.66 GiB of "
                                      "non-torch memory against the plan's 0.38 (V0 0.6.4 "
                                      "counts the device's whole use beyond torch's: 15.90 GiB "
                                      "in use after the 14.25 loaded), on a 24 GB card under "
                                      "WSL; the log does not break the 1.29 GiB down",
    "v0_19_llama31_70b_awq_2xa100_40gb_mindsafe": "-10.3%: 0.9 x the catalog A100 40GB's 39.39 GiB "
                                                  "less the 18.58 loaded and the 15.96 pool leaves "
                                                  "0.91 GiB where the plan holds 2.59 (1.81 of "
                                                  "NCCL and all-reduce buffers for TP 2); no line "
                                                  "breaks it down",
    "v0_17_qwen25_7b_rtx3090_065_offprof": "-33.1%: a 0.49 GiB pool against the plan's 0.33; "
                                           "the plan holds 0.16 GiB more outside the pool "
                                           "(its sampler peak and non-torch estimate, 0.78, "
                                           "against the 0.56 the log leaves) and the curated "
                                           "excerpt breaks none of it down",
}
# Within 10% but outside 5%:
KV_NEAR_MISSES = {
    "v0_13_gptoss20b_abliterated_mxfp4_gb10_025_vllmrouter": (
        "+8.3%: planned at 256 sequences, the pair of the log's default "
        "max_num_batched_tokens=2048 (-34.0% at the 1,024 a 119.70 GiB device gets by size): "
        "a 14.01 GiB pool against the log's 12.94; 0.25 x the assumed 119.70 GiB (the log "
        "prints no total) less the 13.72 loaded and the pool leaves 3.27 GiB where the plan "
        "holds 2.20; no line breaks it down"),
    "v1_qwen3_30b_a3b_4xa10_issue17469": "+6.5%: 0.8.5's device-wide count held 0.30 GiB beyond "
                                         "the context, one NCCL communicator and FlashInfer's "
                                         "sampler, which no line of the excerpt breaks down",
    "v1_qwen3_235b_fp8_4xh100_issue21348": "+5.5%: 0.35 GiB of pool the log's two lines do "
                                           "not break down (the LMCache connector's one GPU "
                                           "buffer, 12 MB, is made before the load)",
    "v0_29_qwen3_8b_rtx4090_48gb_mnbt512_cold_yjlab": (
        "+5.9%: 16.54 GiB consumed (weights + non-torch) against the 15.38 of the same card's "
        "4096-token starts, 1.16 GiB more, the embedding table's size, held past the cold "
        "compile of the range (1, 512)"),
    "v0_30_qwen3_4b_rtx5060ti_wsl2_xinference_prp": "-7.9%: the plan's CUDA-graph estimate "
                                                    "(0.53 GiB) is 0.15 above vLLM's 0.38 and its "
                                                    "non-torch memory (0.40) 0.15 above what the "
                                                    "consumed line leaves (0.25) on a desktop-"
                                                    "shared RTX 5060 Ti (WSL2)",
    "v1_qwen3vl_30b_a3b_4x3090_pcie_sipeed": "-7.2%: the encoder profile with what it holds, "
                                             "the model-built buffers and the sort's 38 B a "
                                             "logit planned; the plan leaves 0.17 GiB less "
                                             "pool than the log, against this release's "
                                             "unmeasured non-torch estimate",
    "v0_17_llama31_8b_rtx3090_075_offprof": "-7.9%: the plan holds 0.71 GiB beyond the weights "
                                            "(sampler peak 0.46, non-torch 0.25) where the log "
                                            "leaves 0.54; the curated excerpt does not break it "
                                            "down (the card's 0.9 and 0.86 starts: -3.4%, -3.8%)",
    "v0_11_llama31_8b_l4_abinav": "-7.8%: the plan holds 0.86 GiB beyond the weights (sampler "
                                  "peak 0.61, non-torch 0.25) where the log leaves 0.49 of the "
                                  "catalog L4's 21.99 GiB (the log prints no total); no line "
                                  "breaks it down",
}
# Weights beyond 2% of 'Model loading took'
WEIGHT_MISSES = {
    "v1_gemma3_4b_h100_planner": "-5.9%: the text decoder and the SigLIP tower with its "
                                 "projector are 8.07 GiB; vLLM's load took 8.58, 0.51 GiB that "
                                 "no line of the log breaks down",
    "v0_16_minimax_m25_fp8_4xmi300x_eager_fpolica": "-2.4%: 'Model loading took 54.97 GiB' a "
                                                     "rank against the plan's 53.65 (TP 4, block "
                                                     "FP8); no line breaks the 1.32 GiB down, on "
                                                     "the set's first ROCm (MI300X) log",
    **{name: "-3.2%: 'Model loading took 2.98 GiB' against the plan's 2.88, the log's own "
             "'Checkpoint size: 2.88 GiB'; no line breaks the 0.10 GiB down (KV -2.6%)"
       for name in ("v0_30_qwen25_1p5b_t4_eslam", "v0_30_qwen25_1p5b_t4_prefixcache_eslam")},
    "v0_25_gemma4_26b_int4_gb10_dgxspark": (
        "-13.2%: 'Model loading took 16.63 GiB' against the plan's 14.43 (int4 with AWQ-style "
        "groups on the base model's config); the log's own 'Checkpoint size: 16.01 GiB' is 1.58 "
        "above the plan, and no line says which layers the checkpoint keeps at 16 bits (KV +2.0%)"),
}
START_MISSES = {
    "v0_19_qwen3_0p6b_8k_rtx3060_failed_retriva": "vLLM failed in its sampler warm-up right "
                                                  "after a pool the desktop's released memory "
                                                  "had enlarged (KV -14.9%); the plan leaves "
                                                  "2.42 GiB after its smaller pool",
    "v0_27_qwen25_05b_2k_rtx4090_failed_llmso_setup": "not memory: after the pool (KV +0.9%) and "
                                                      "the graphs, FlashInfer's sampler JIT found "
                                                      "no CUDA toolkit (nvcc)",
    "v0_27_qwen25_05b_2k_rtx4090_failed5_llmso_setup": "not memory: after the pool (KV +0.9%) and "
                                                       "the graphs, FlashInfer's sampler JIT build "
                                                       "failed (nvcc 13.3 against 13.0 headers)",
    "v0_27_qwen25_05b_2k_rtx4090_failed6_llmso_setup": "not memory: after the pool (KV -1.2%) and "
                                                       "the graphs, FlashInfer's sampler JIT link "
                                                       "found no libcudart.so / libcuda.so",
    "v1_gptoss20b_2xh100_planner_failed": "vLLM failed warming up its sampler (1,024 dummy "
                                          "requests) after capturing its graphs, as at TP 1: "
                                          "the allocator's held blocks are sized by no rule",
    "v1_qwen3_30b_a3b_4xa10_issue17469": "vLLM failed in CUDA-graph capture after sizing a pool "
                                         "that held the request; by the release's rules 1.71 "
                                         "GiB are left after capture and the sampler warm-up "
                                         "(the thread: it fails even at max-num-seqs 1, starts "
                                         "with enforce-eager)",
    "v1_gptoss20b_h100_planner_failed": "vLLM failed in its sampler warm-up after capturing "
                                        "1.84 GiB of graphs; by the rules 2.46 GiB are left, "
                                        "and vLLM's own arithmetic (--kv-cache-memory 59.93 GiB "
                                        "to use the GPU, 58.47 in use) also says it fits: the "
                                        "2.02 GiB its allocator held after profiling is sized "
                                        "by no rule",
    "v0_17_llama31_8b_rtx3090_failed_offprof": "vLLM ran out of memory warming up its sampler; "
                                               "the plan leaves 2.31 GiB outside the budget and "
                                               "needs 0.98, but the OOM line shows 1.47 GiB of "
                                               "the card in no process it names (KV -2.2%)",
    "v0_17_qwen25_7b_rtx3090_065_offprof": "vLLM started with a 0.49 GiB pool (9,088 tokens); "
                                           "the plan's 0.33 GiB cannot hold one 8,192-token "
                                           "request, so it says the engine refuses (KV -33.1%)",
}
# The one started log the plan says would not start: a pool at the one-request boundary, whose
# same flags vLLM itself refused in the next start (0.41 GiB against 0.44 needed)
REFUSED_BUT_STARTED = {"v0_17_qwen25_7b_rtx3090_065_offprof"}
KV_WITHIN_5_AT_LEAST = 103 / 120
# measured: 103/120 unchanged with two held-out logs added 2026-12-08 on branch logs-4, both
# kept not planned for want of a config.json (a Qwen3-VL-Embedding-2B pooling start on a T4
# under a 0.11.0 source build; Qwen2-VL-2B-Instruct on an RTX 4080 under WSL, 0.10.2), so the
# planned set is the same 120;
# measured: 103/120 with three held-out MoE logs added 2026-12-08 on branch logs-v1
# (Qwen3-VL-30B-A3B at TP 2 on two H100 SXM under 0.12.0, -3.3%; Qwen3-30B-A3B-Instruct-2507
# eager on an RTX PRO 6000 Server Edition under 0.12.0, -0.4%; an MXFP4 gpt-oss-20b fine-tune
# at 0.25 on a GB10 under NVIDIA's 0.13.0 build, -34.0%);
# measured: 101/117 once the reader told a --num-gpu-blocks-override start's profiled blocks
# from its override, which planned the kept 0.29 override start (-0.6%); 100/116 with the six
# held-out 0.25-0.29 logs added 2026-12-08 on branch logs-new
# (two DGX Spark GB10 Gemma 4 26B-A4B starts under 0.25.1, INT4 +2.0% and NVFP4 -0.5%; two
# RTX 4090 Qwen3-8B-AWQ starts under 0.28.0, -1.0% each; an RTX 4090 48GB Qwen3-8B start under
# 0.29.0, -0.5%; and one kept but not planned: reconcile refuses a 0.29.0 start with
# num_gpu_blocks_override 1024 as another model's);
# measured: 95/111 once reconcile read a 0.20+ token line back to blocks by its release's rule
# (int(max_concurrency x max_model_len)), which planned the held-out H200 Gemma 4 26B start under
# 0.20.2 (+0.8%); 94/110 once reconcile stopped reading a V0 log's LoRA knobs without enable_lora
# and stopped taking V0 0.6.5-0.7's profile summary ('model weights take') for a second start,
# which planned two of the held-out logs below (a WSL 24 GB card under 0.6.4.post1, +41.1%; a
# 44.52 GiB card under 0.6.6.post1, -0.2%); 93/108 with three more held-out logs added
# 2026-12-08 (a 4x MI300X MiniMax-M2.5 start under 0.16.0, +1.1%; a 2x A100 40GB Llama-3.1-70B
# AWQ start under 0.19.0, -10.3%; an H200 Gemma 4 26B start under 0.20.2, kept but not planned:
# reconcile refuses its token count); 92/106 with six more held-out logs (an L4 start
# under 0.11.0, -7.8%; two T4 starts under 0.30.0, -2.6%; an H200 start under 0.11.2, -0.1%; an
# RTX 3090 refusal under 0.9.1, said); 89/102 with nine more held-out logs before them (a GCE A100
# 40GB under 0.15.1, a TP 2 A100 pair under 0.10.1.1, six RTX 3090 starts under 0.17.1 and the
# same card's sampler-OOM failure; two miss: -7.9% and -33.1%); 82/93 before them, with
# Phi-2's H100 log planned (+0.0%; 81/92
# before model_type phi was read) and twenty-seven held-out logs no rule was fitted on (79/90
# before the two vLLM 0.18.0 starts of the RTX 4090 48GB, 74/82 with the first seventeen, 74/84
# with the RTX 5060 Ti pair; 59/66 before them; 58/66 before Model Runner V2's penalties state,
# 57/66 before the cold-compile term); the Done-when asks 90%: missed at 87.3% (88.2% before
# the nine, 88.0% before Phi-2) since the two RTX 5060 Ti logs of vLLM 0.29.0 and 0.30.0 (90.2%
# before them, docs/reconcile.md)


def _cases(predicate, misses=None):
    return [pytest.param(c, id=c.name, marks=_marks(c, misses or {})) for c in bench.cases()
            if predicate(c)]


def _marks(case, misses):
    if case.name in misses:
        return [pytest.mark.xfail(strict=True, reason=misses[case.name])]
    return []


def test_the_set_is_at_least_80_real_logs_with_sidecars():
    logs = sorted(LOGS.glob("*.log"))
    assert len(logs) >= 80
    for log in logs:
        assert log.read_text().startswith("# SOURCE:"), log.name
        meta = json.loads(log.with_suffix(".json").read_text())
        assert meta["source_url"].startswith("https://"), log.name
        assert {"vllm_version", "gpu", "device", "model", "config", "flags",
                "started"} <= meta.keys(), log.name
        if meta["config"]:
            assert (CONFIGS / meta["config"] / "config.json").is_file(), log.name
            assert (CONFIGS / meta["config"] / "SOURCE.md").read_text().strip(), log.name


def test_the_set_spans_what_it_must():
    metas = [c.meta for c in bench.cases()]
    facts = [parse_vllm_log(c.log.read_text(), c.name) for c in bench.cases()]
    assert {f.engine_version for f in facts} == {"v0", "v1"}
    assert {m["flags"].get("tensor_parallel_size", 1) for m in metas} >= {1, 2, 4, 8}
    assert any(str(m["flags"].get("kv_cache_dtype", "")).startswith("fp8") for m in metas)
    assert any(not m["started"] for m in metas)
    minors = {tuple(m["vllm_version"].split(".")[:2]) for m in metas if m["vllm_version"]}
    assert len(minors) >= 3


@pytest.mark.parametrize("case", _cases(lambda c: c.planned, KV_MISSES))
def test_kv_within_10_percent(case):
    outcome = bench.evaluate(case)
    if outcome.kv_error is not None:
        assert abs(outcome.kv_error) <= 0.10, f"{outcome.kv_error:+.1%}"


@pytest.mark.parametrize("case", _cases(lambda c: c.planned, {**KV_MISSES, **KV_NEAR_MISSES}))
def test_kv_within_5_percent(case):
    outcome = bench.evaluate(case)
    if outcome.kv_error is not None:
        assert abs(outcome.kv_error) <= 0.05, f"{outcome.kv_error:+.1%}"


@pytest.mark.parametrize("case", _cases(lambda c: c.planned, WEIGHT_MISSES))
def test_weights_within_2_percent_of_model_loading_took(case):
    outcome = bench.evaluate(case)
    if outcome.weights_error is not None:
        assert abs(outcome.weights_error) <= 0.02, f"{outcome.weights_error:+.2%}"


@pytest.mark.parametrize("case", _cases(lambda c: c.planned, START_MISSES))
def test_does_not_start_where_vllm_did_not(case):
    assert bench.evaluate(case).predicted_starts == case.meta["started"]


def test_the_rates_over_the_whole_planned_set():
    """The Done-when's rates, as measured: which logs miss is exactly the named lists."""
    outcomes = [bench.evaluate(c) for c in bench.cases() if c.planned]
    assert len(outcomes) >= 25
    errors = {o.case.name: abs(o.kv_error) for o in outcomes if o.kv_error is not None}
    assert {n for n, e in errors.items() if e > 0.10} == set(KV_MISSES)
    assert {n for n, e in errors.items() if 0.05 < e <= 0.10} == set(KV_NEAR_MISSES)
    within_5 = sum(e <= 0.05 for e in errors.values()) / len(errors)
    assert within_5 >= KV_WITHIN_5_AT_LEAST, f"{within_5:.0%}"
    weights = {o.case.name: abs(o.weights_error) for o in outcomes
               if o.weights_error is not None}
    assert {n for n, e in weights.items() if e > 0.02} == set(WEIGHT_MISSES)
    wrong = {o.case.name for o in outcomes if o.predicted_starts != o.case.meta["started"]}
    assert wrong == set(START_MISSES)
    assert {o.case.name for o in outcomes if o.case.meta["started"] and not
            o.predicted_starts} == REFUSED_BUT_STARTED


def test_hybrid_logs_are_kept_and_say_why_they_are_not_planned():
    hybrids = [c for c in bench.cases() if c.meta.get("hybrid")]
    assert len(hybrids) == 7
    for case in hybrids:
        assert not case.planned and "config" in case.meta["not_planned"], case.name


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in bench.cases()])
def test_every_memory_line_of_every_log_is_read(case):
    """No line that mentions memory is dropped: each is kept, with what it gave."""
    facts = parse_vllm_log(case.log.read_text(), case.name)
    numbers = {line.number for line in facts.lines}
    text = case.log.read_text().splitlines()
    for number, line in enumerate(text, 1):
        if MEMORY_WORDS.search(line) and not line.lstrip().startswith("#"):
            assert number in numbers or facts.lines[-1].number < number, (number, line)


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in bench.cases()
                                  if c.planned])
def test_reconcile_names_every_line_and_prints_the_tables_figures(case):
    """`servecap reconcile` given the sidecar's GPU and flags exits 0 or 1, names every line
    read, and predicts the KV figure the regression table shows, which is `servecap plan`'s
    for the same flags (the sidecars state every flag the logs print)."""
    model, plan_flags, deploy = bench.flags_for(case)
    args = ["reconcile", str(case.log), "--model", model, "--device", plan_flags.device,
            "--engine", deploy.engine, "--json", "-tp", str(deploy.tensor_parallel_size)]
    for flag, value in (("--max-model-len", plan_flags.context),
                        ("--kv-cache-dtype", plan_flags.kv_dtype),
                        ("--weight-dtype", plan_flags.weight_dtype),
                        ("--max-num-batched-tokens", plan_flags.max_num_batched_tokens),
                        ("--gpu-memory-utilization", deploy.gpu_memory_utilization),
                        ("--max-num-seqs", deploy.max_num_seqs),
                        ("-pp", deploy.pipeline_parallel_size),
                        ("--nnodes", deploy.nnodes),
                        ("--interconnect", deploy.interconnect),
                        ("--mxfp4-backend", deploy.mxfp4_backend),
                        ("--sampler", deploy.sampler)):
        args += [flag, str(value)] if value is not None else []
    args += ["--cold-compile"] if deploy.cold_compile else []
    args += ["--enforce-eager"] if deploy.enforce_eager else []
    result = CliRunner().invoke(app, args + ["--entrypoint", deploy.entrypoint])
    assert result.exit_code in (0, 1), result.output
    report = json.loads(result.stdout)
    facts = parse_vllm_log(case.log.read_text(), case.name)
    assert [x["line"] for x in report["lines_read"]] == [x.number for x in facts.lines]
    assert report["agrees"] == (result.exit_code == 0)
    rows = {row["key"]: row for row in report["rows"]}
    outcome = bench.evaluate(case)
    plan = deployment_from_flags(model, plan_flags, deploy).plan.budget
    if outcome.logged_kv is None:  # refused before the profile: the start row decides
        assert rows["starts"]["predicted"] == int(outcome.predicted_starts)
    elif outcome.kv_unit == "tokens":
        assert rows["kv_cache_tokens"]["predicted"] == outcome.predicted_kv == \
            plan.kv_cache_tokens
    else:
        assert rows["kv_pool"]["predicted"] == round(outcome.predicted_kv * 2**30) == \
            plan.kv_pool_bytes


def test_every_miss_is_explained_in_its_sidecar_and_no_hit_carries_one():
    """bench/vllm_logs.py prints each miss with its sidecar's 'miss' reason: every miss has
    one, and a log that no longer misses loses it (so a fix does not leave a stale reason)."""
    outcomes = [bench.evaluate(c) for c in bench.cases() if c.planned]
    missed = {o.case.name for o in outcomes if bench.is_miss(o)}
    explained = {o.case.name for o in outcomes if o.case.meta.get("miss")}
    assert missed == explained
    assert missed == set(KV_MISSES) | set(KV_NEAR_MISSES) | set(WEIGHT_MISSES) | \
        set(START_MISSES)
    assert "NOT EXPLAINED" not in "\n".join(bench.misses(outcomes))


def test_vllm_0_11s_logged_encoder_profile_is_planned_as_logged():
    """v1_qwen3vl_30b_a3b_4x3090_pcie_sipeed: the plan holds the profile the log prints
    (153,600 tokens, 1 video item, padded to the budget), what profile_run keeps beside it (the
    dummy video's pixel values and the last unpadded output), the Qwen3-VL tower's weights
    (0.26 GiB a rank at TP 4), the M-RoPE cache (262,144 x 4 positions) and the deepstack
    buffers (ledger/vllm_buffers.py): the weights land on 'Model loading took' and the KV error
    goes from +126.7% (+19.3% before the buffers, +10.1% before the held inputs) to -4.1%,
    and to -7.2% with the PyTorch sort's 38 B a logit (V1_TORCH_SAMPLER_BYTES)."""
    case = next(c for c in bench.cases() if c.name == "v1_qwen3vl_30b_a3b_4x3090_pcie_sipeed")
    outcome = bench.evaluate(case)
    assert -0.08 < outcome.kv_error < -0.065 and abs(outcome.weights_error) < 0.001
    model, plan_flags, deploy = bench.flags_for(case)
    plan = deployment_from_flags(model, plan_flags, deploy).plan
    assert plan.line("encoder_cache") == 153600 * 2048 * 4 * 2
    assert (plan.encoder_profile.budget_tokens, plan.encoder_profile.items,
            plan.encoder_profile.modality) == (153600, 1, "video")
    # the video's 49,152 patches of 3 x 2 x 16 x 16 bf16 values, and its 12,288-row output
    assert plan.line("encoder_profile") == 49_152 * 1536 * 2 + 12_288 * 8192 * 2
    # the tower on one of 4 ranks, and 3 deepstack buffers of 2,048 tokens x 2,048 x 2 B
    assert plan.line("encoder_weights") == 138_145_052 * 2 + 3 * 2048 * 2048 * 2
    assert plan.line("rotary_cache") == 262_144 * 4 * 128 * 2


def test_failures_that_are_not_memory_are_counted_apart():
    """The start rate counts memory failures against the rules; a failed kernel build (its
    sidecar's 'failure' begins "not memory") is listed with its reason but no rule could say
    'does not start' of it."""
    outcomes = [bench.evaluate(c) for c in bench.cases() if c.planned]
    line = next(s for s in bench.summary(outcomes, []) if s.startswith("'does not start'"))
    not_memory = {o.case.name for o in outcomes if not o.case.meta["started"]
                  and (o.case.meta.get("failure") or "").startswith("not memory")}
    assert not_memory and not_memory <= set(START_MISSES)
    assert f"({len(not_memory)} failed for something else)" in line


def test_the_held_out_logs_are_reported_on_their_own():
    """A sidecar's `held_out` marks a log added after every rule and constant: the bench gives
    its rates apart, over exactly those logs."""
    outcomes = [bench.evaluate(c) for c in bench.cases() if c.planned]
    held = [o for o in outcomes if o.case.meta.get("held_out")]
    assert len(held) >= 28 and all(o.case.meta["held_out"].startswith("added ") for o in held)
    line = next(s for s in bench.summary(outcomes, []) if s.startswith("held out"))
    kv = [o for o in held if o.kv_error is not None]
    assert f"held out ({len(held)} planned logs" in line and f"/{len(kv)};" in line
