"""Routing as the families' real config.json files state it, bias-corrected grouped top-k as
transformers' DeepSeek-V3 router computes it, both expert paths agreeing, and real MoE configs
built with exactly the ledger's weights."""

from dataclasses import replace
from pathlib import Path

import pytest

from servecap.ledger.errors import SpecError
from servecap.ledger.plan import build_plan
from servecap.ledger.serve import ServeSpec
from servecap.model_configs import load_model

torch = pytest.importorskip("torch")
from servecap.runtime import moe  # noqa: E402
from servecap.runtime.model import Decoder, with_num_layers  # noqa: E402
from servecap.runtime.router import SIGMOID, SOFTMAX, Routing, route  # noqa: E402
from servecap.runtime.weights import decoder_options, options_from_config  # noqa: E402

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"


@pytest.mark.parametrize(("name", "routing", "swiglu"), [
    ("deepseek-ai--DeepSeek-V3", Routing(SIGMOID, True, 8, 4, True, 2.5), None),
    # kimi_k2 runs as deepseek_v3 with its own groups and scale
    ("moonshotai--Kimi-K2-Instruct", Routing(SIGMOID, True, 1, 1, True, 2.827), None),
    ("Qwen--Qwen3-30B-A3B", Routing(SOFTMAX, True), None),
    ("Qwen--Qwen3-Next-80B-A3B-Thinking", Routing(SOFTMAX, True), None),
    ("openai--gpt-oss-20b", Routing("topk_softmax", True), (1.702, 7.0)),
])
def test_real_configs_route_as_stated(name: str, routing: Routing, swiglu) -> None:
    spec = load_model(str(CONFIGS / name / "config.json")).spec
    opts = decoder_options(CONFIGS / name, spec.model_type).moe
    assert opts.routing == routing
    assert opts.swiglu == swiglu


@pytest.mark.parametrize(("field", "value"), [("scoring_func", "tanh"),
                                              ("topk_method", "random"),
                                              ("hidden_act", "gelu")])
def test_unknown_routing_is_refused_by_name(field: str, value: str) -> None:
    config = {"model_type": "deepseek_v3", field: value}
    with pytest.raises(SpecError, match=field) as err:
        options_from_config(config, "x/config.json")
    assert "x/config.json" in str(err.value)


def test_groups_that_do_not_split_the_experts_are_refused(tmp_path) -> None:
    spec = load_model(str(CONFIGS / "deepseek-ai--DeepSeek-V3" / "config.json")).spec
    small = with_num_layers(replace(spec, quant=None), 4)
    opts = options_from_config({"model_type": "deepseek_v3", "n_group": 7}, "config.json")
    with pytest.raises(SpecError, match="n_group = 7: must divide the 256 experts"):
        with torch.device("meta"):
            Decoder(small, opts)


def test_grouped_sigmoid_routing_equals_transformers() -> None:
    """64 experts in 8 groups, 3 eligible, top-6, bias-corrected choice, renormalised x 2.5:
    the same experts and weights as transformers' DeepseekV3TopkRouter."""
    transformers = pytest.importorskip("transformers")
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3TopkRouter

    config = transformers.DeepseekV3Config(hidden_size=32, n_routed_experts=64,
                                           num_experts_per_tok=6, n_group=8, topk_group=3)
    reference = DeepseekV3TopkRouter(config)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        reference.weight.copy_(torch.randn(64, 32, generator=generator))
        reference.e_score_correction_bias.copy_(torch.randn(64, generator=generator) * 0.1)
    x = torch.randn(50, 32, generator=generator)
    _, weights, ids = reference(x)
    logits = x @ reference.weight.T
    ours, our_ids = route(logits, Routing(SIGMOID, True, 8, 3, True, 2.5), 6,
                          reference.e_score_correction_bias)
    order, our_order = ids.sort(-1), our_ids.sort(-1)
    assert torch.equal(order.values, our_order.values)
    assert torch.allclose(weights.gather(1, order.indices), ours.gather(1, our_order.indices),
                          atol=1e-6)


def test_ungrouped_groups_score_by_their_best_expert() -> None:
    """Without a correction bias a group scores as its best expert (vLLM's grouped_topk):
    every chosen expert lies in one of the topk_group groups with the highest maximum."""
    generator = torch.Generator().manual_seed(1)
    logits = torch.randn(40, 16, generator=generator)
    _, ids = route(logits, Routing(SOFTMAX, False, 4, 2), 3)
    best_groups = logits.view(40, 4, 4).amax(-1).topk(2, dim=-1).indices  # (T, 2)
    assert all(set((row // 4).tolist()) <= set(groups.tolist())
               for row, groups in zip(ids, best_groups, strict=True))


def test_grouped_matmul_and_the_per_expert_loop_agree(monkeypatch) -> None:
    """The same tokens through torch's grouped_mm and through one matmul per expert hit."""
    spec = with_num_layers(load_model("qwen3-30b-a3b").spec, 1)
    spec = replace(spec, hidden_size=64, moe=replace(spec.moe, expert_intermediate_size=32))
    experts = moe.Experts(spec, moe.MoEOptions()).requires_grad_(False)
    generator = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for p in experts.parameters():
            p.copy_(torch.randn(p.shape, generator=generator) * 0.1)
    x = torch.randn(37, 64, generator=generator)
    weights, ids = route(torch.randn(37, 128, generator=generator), Routing(), 8)
    grouped = experts(x, weights, ids)
    monkeypatch.setattr(moe, "grouped_mm_serves", lambda *args: False)
    assert torch.allclose(grouped, experts(x, weights, ids), atol=1e-6)


@pytest.mark.parametrize(("name", "layers"), [
    ("deepseek-ai--DeepSeek-V3", 4),  # three dense layers, then MoE with a shared expert
    ("moonshotai--Kimi-K2-Instruct", 2),
    ("openai--gpt-oss-20b", 2),
    ("Qwen--Qwen3-Next-80B-A3B-Thinking", 4),
    ("Qwen--Qwen3-235B-A22B", 2),
])
def test_real_moe_configs_build_with_the_ledgers_weights(name: str, layers: int) -> None:
    """Built on the meta device as bf16 (the FP8 and MXFP4 checkpoints' shapes unquantized):
    router, stacked experts, shared experts, sinks and MLA projections are the plan's
    weights line to the byte."""
    spec = load_model(str(CONFIGS / name / "config.json")).spec
    spec = with_num_layers(replace(spec, quant=None), layers)
    with torch.device("meta"):
        model = Decoder(spec, decoder_options(CONFIGS / name, spec.model_type))
        model = model.to(torch.bfloat16)
    serve = ServeSpec(device_bytes=1 << 40, context_tokens=4096, concurrency=1,
                      runtime_peak_bytes=0)
    assert model.weight_bytes == build_plan(spec, serve).line("weights")
