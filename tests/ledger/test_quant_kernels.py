"""What each vLLM release holds for a quantized checkpoint on each GPU generation, from the
capability rules read at its tag: native paths, Marlin fallbacks, refusals, and GPTQ's g_idx
that Marlin drops (or doubles with act-order)."""

from dataclasses import replace

import pytest

from servecap.ledger.quant_kernels import kernel, path_on
from servecap.ledger.residency import by_generation
from servecap.ledger.weights import weight_bytes
from servecap.model_configs import load_model
from servecap.model_configs.quant import parse_quantization


def rows(quant: dict, version: tuple[int, ...]) -> dict:
    spec = replace(load_model("llama-3.1-8b").spec, quant=parse_quantization(quant))
    got = weight_bytes(spec, 16, spec.quant)
    total = got.param_bytes + got.metadata_bytes
    return {r.generation: r for r in by_generation(spec, 16, version, total)}, total


@pytest.mark.parametrize(("version", "least"), [((0, 8, 5), 100), ((0, 9, 2), 80),
                                                ((0, 13, 0), 80), ((0, 14, 0), 75),
                                                ((0, 33), 75)])
def test_nvfp4_runs_natively_on_blackwell_and_through_marlin_from_each_releases_floor(
        version, least) -> None:
    k = kernel("nvfp4", version)
    assert k.min_sm == least and path_on(k, 100) == (True, k.native)
    assert path_on(k, least)[0] and not path_on(k, least - 1)[0]
    if least < 100:
        assert "Marlin W4A16" in path_on(k, 90)[1]


def test_gptq_marlin_drops_g_idx_unless_act_order() -> None:
    gptq = {"quant_method": "gptq", "bits": 4, "group_size": 128}
    plain, total = rows(gptq, (0, 33))
    g_idx = 32 * (6 * 4096 + 14_336) * 4  # one int32 per input column of each matrix
    assert plain["ampere"].resident_bytes == total - g_idx
    assert plain["volta"].resident_bytes == total  # exllama on the checkpoint's layout
    ordered, _ = rows({**gptq, "desc_act": True}, (0, 33))
    assert ordered["hopper"].resident_bytes == total + g_idx
    assert rows(gptq, (0, 13, 0))[0]["turing"].resident_bytes == total  # Marlin from SM80


def test_formats_a_release_no_longer_reads_are_refused_by_name() -> None:
    bnb = {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"}
    assert rows(bnb, (0, 27, 1))[0]["volta"].runs
    assert "0.28" in rows(bnb, (0, 28))[0]["hopper"].how
    sparse = {"quant_method": "compressed-tensors", "ignore": ["lm_head"],
              "config_groups": {"g": {"targets": ["Linear"], "weights": {
                  "num_bits": 8, "type": "float", "strategy": "channel"}}},
              "sparsity_config": {"format": "sparse-24-bitmask", "sparsity_structure": "2:4"}}
    old, _ = rows(sparse, (0, 18, 1))
    assert old["hopper"].runs and not old["ampere"].runs
    assert not rows(sparse, (0, 19, 1))[0]["hopper"].runs


def test_modelopt_fp8_on_ampere_from_0_27() -> None:
    fp8 = {"quantization": {"quant_algo": "FP8", "exclude_modules": ["lm_head"]}}
    assert not rows(fp8, (0, 26, 0))[0]["ampere"].runs
    assert "Marlin W8A16" in rows(fp8, (0, 27, 0))[0]["ampere"].how
    assert "native FP8" in rows(fp8, (0, 27, 0))[0]["ada"].how
