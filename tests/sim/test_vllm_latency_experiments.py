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
