"""Granite-4 (granitemoehybrid: Mamba-2 or attention per layer, MoE + shared MLP) and Falcon-H1
(falcon_h1: attention and Mamba-2 side by side in every layer) as vLLM allocates them. No
official config.json of either was found to keep as a fixture; these are transformers' own
config-class defaults (written here, at test time), with a layer pattern for Granite, checked
against transformers' model classes and an independent computation of vLLM's cache rules
(vllm/model_executor/models/granitemoehybrid.py, falcon_h1.py; mamba_utils.py)."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servecap.ledger.arch import count_parameters
from servecap.ledger.engines import EngineSpec
from servecap.ledger.errors import SpecError
from servecap.ledger.plan import Overrides, build_plan
from servecap.ledger.serve import ServeSpec
from servecap.ledger.state import state_shapes
from servecap.ledger.units import GiB
from servecap.ledger.weights import WeightBytes
from servecap.model_configs import load_model

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")
NO_WEIGHTS = Overrides(weights=WeightBytes(0, 0, 0, 0, ""), weights_source="test",
                       per_device=True)
GRANITE_LAYERS = ["mamba"] * 4 + ["attention"] + ["mamba"] * 5  # one attention layer in ten
FAMILIES = {"granitemoehybrid": {"num_hidden_layers": 10, "layer_types": GRANITE_LAYERS},
            "falcon_h1": {"num_hidden_layers": 10}}


def class_defaults(model_type: str, **changes) -> dict:
    """transformers' config class with its defaults, as config.json would store it."""
    transformers.logging.set_verbosity_error()
    data = transformers.AutoConfig.for_model(model_type, **FAMILIES[model_type]).to_dict()
    return {**data, "torch_dtype": "bfloat16", **changes}


def write(tmp_path, data: dict):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    return path


def spec_of(tmp_path, model_type: str, **changes):
    return load_model(str(write(tmp_path, class_defaults(model_type, **changes)))).spec


def transformers_parameters(data: dict) -> int:
    data = dict(data)
    cfg = transformers.AutoConfig.for_model(data.pop("model_type"), **data)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(cfg)
    state = model.state_dict()
    return sum(p.numel() for p in model.parameters()) + sum(
        b.numel() for key, b in model.named_buffers() if key in state)


def mamba_shape(data: dict) -> tuple[int, int, int, int, int, int]:
    """(intermediate, heads, head_dim, groups, d_state, kernel) as vLLM's
    get_mamba_state_shape_from_config reads them."""
    inner = data.get("mamba_d_ssm") or data["mamba_expand"] * data["hidden_size"]
    heads = data["mamba_n_heads"]
    return (inner, heads, inner // heads, data["mamba_n_groups"], data["mamba_d_state"],
            data["mamba_d_conv"])


def state_layer_bytes(data: dict, tp: int = 1) -> int:
    """conv (kernel - 1, (inner + 2 G' S) / tp) + ssm (heads / tp, head_dim, S), both bf16;
    G' = G, or tp when tp does not divide G (the B/C groups replicated)."""
    inner, heads, dim, groups, d_state, kernel = mamba_shape(data)
    groups = groups if groups % tp == 0 else tp
    return ((kernel - 1) * (inner + 2 * groups * d_state) // tp + heads // tp * dim * d_state) * 2


def attention_layers(data: dict) -> int:
    if data["model_type"] == "falcon_h1":
        return data["num_hidden_layers"]
    return sum(t in ("attention", "full_attention") for t in data["layer_types"])


def mamba_layers(data: dict) -> int:
    return data["num_hidden_layers"] - (0 if data["model_type"] == "falcon_h1"
                                        else attention_layers(data))


@pytest.mark.parametrize("model_type", sorted(FAMILIES))
def test_parameters_match_transformers_and_state_matches_vllms_shapes(tmp_path, model_type):
    data = class_defaults(model_type)
    spec = load_model(str(write(tmp_path, data))).spec
    plan = build_plan(spec, ServeSpec(device_bytes=80 * GiB, context_tokens=8192,
                                      concurrency=1, runtime_peak_bytes=0), NO_WEIGHTS)
    heads = data["num_key_value_heads"] or data["num_attention_heads"]
    head_dim = data.get("head_dim") or data["hidden_size"] // data["num_attention_heads"]
    assert count_parameters(spec) == transformers_parameters(data)
    assert plan.kv_bytes_per_token == attention_layers(data) * 2 * heads * head_dim * 2
    assert plan.state_bytes_per_request == mamba_layers(data) * state_layer_bytes(data)
    assert spec.is_hybrid and spec.parallel_state == (model_type == "falcon_h1")


@pytest.mark.parametrize("model_type", sorted(FAMILIES))
def test_vllm_pool_by_hand(tmp_path, model_type):
    """The hybrid page arithmetic of docs/hybrid.md: B = 16 cdiv(s, 16 a), page = B a, groups
    of g = the smaller count's layers, blocks = pool // page // g, per request cdiv(L, B) +
    2 per state group (align)."""
    data = class_defaults(model_type)
    spec = load_model(str(write(tmp_path, data))).spec
    serve = ServeSpec(device_bytes=80 * GiB, context_tokens=8192, concurrency=1,
                      runtime_peak_bytes=0)
    pool = 40 * GiB
    budget = build_plan(spec, serve, NO_WEIGHTS, engine=EngineSpec(
        "vllm", kv_cache_memory_bytes=pool, non_torch_bytes=0)).budget
    heads = data["num_key_value_heads"] or data["num_attention_heads"]
    head_dim = data.get("head_dim") or data["hidden_size"] // data["num_attention_heads"]
    one_token, state = 2 * heads * head_dim * 2, state_layer_bytes(data)
    block = 16 * -(-state // (16 * one_token))
    attn, mamba = attention_layers(data), mamba_layers(data)
    group = max(attn, mamba) if max(attn, mamba) < 1.5 * min(attn, mamba) else min(attn, mamba)
    state_groups = -(-mamba // group)
    assert budget.block_size_tokens == block
    assert budget.num_groups == -(-attn // group) + state_groups
    assert budget.num_gpu_blocks == pool // (block * one_token) // group
    assert budget.blocks_per_request == -(-8192 // block) * -(-attn // group) + 2 * state_groups


@pytest.mark.parametrize("tp", [2, 4])
@pytest.mark.parametrize("model_type", sorted(FAMILIES))
def test_state_per_rank_divides_heads_and_replicates_one_group(tmp_path, model_type, tp):
    data = class_defaults(model_type)
    spec = load_model(str(write(tmp_path, data))).spec
    inner, heads, dim, groups, d_state, kernel = mamba_shape(data)
    assert groups == 1  # transformers' default: replicated on every rank
    conv, ssm = state_shapes(spec.state, tp)
    assert conv == (kernel - 1, (inner + 2 * tp * d_state) // tp)
    assert ssm == (heads // tp, dim, d_state)
    with pytest.raises(SpecError, match="--tensor-parallel-size"):
        state_shapes(spec.state, 3)  # 128 Mamba heads do not split across 3 ranks (divide())


def test_falcon_mamba_d_ssm_null_means_expand_times_hidden(tmp_path):
    spec = spec_of(tmp_path, "falcon_h1", mamba_d_ssm=None, mamba_n_heads=64, mamba_d_head="auto")
    assert spec.state.intermediate == 2 * 4096 and spec.state.recurrent_shape == (128, 256)
    omitted = class_defaults("falcon_h1", mamba_n_heads=64, mamba_d_head="auto")
    del omitted["mamba_d_ssm"]
    assert load_model(str(write(tmp_path, omitted))).spec.state.intermediate == 1024


@pytest.mark.parametrize("model_type, field, value, allowed", [
    ("falcon_h1", "mlp_bias", True, "only false"),
    ("falcon_h1", "mamba_d_head", 7, "mamba_d_head x mamba_n_heads"),
    ("granitemoehybrid", "mamba_d_head", "wide", "'auto'"),
    ("granitemoehybrid", "layer_types", ["mamba"] * 9 + ["moe"], "each one of"),
])
def test_bad_fields_are_refused_by_name(tmp_path, model_type, field, value, allowed):
    with pytest.raises(SpecError) as error:
        spec_of(tmp_path, model_type, **{field: value})
    assert field in str(error.value) and allowed in str(error.value)


def test_the_runtime_refuses_both_families_by_name(tmp_path):
    model = pytest.importorskip("servecap.runtime.model")
    for model_type in FAMILIES:  # the runtime runs Mamba-2 as Nemotron-H lays it out only
        with pytest.raises(SpecError, match=r"(mamba|Mamba-2).*plan it with servecap plan"):
            model.check_buildable(spec_of(tmp_path, model_type))


@pytest.fixture(scope="module")
def family_specs(tmp_path_factory) -> dict:
    return {model_type: spec_of(tmp_path_factory.mktemp(model_type), model_type)
            for model_type in FAMILIES}


def _plan(spec, context: int, concurrency: int, engine: str = "plain"):
    serve = ServeSpec(device_bytes=80 * GiB, context_tokens=context, concurrency=concurrency,
                      runtime_peak_bytes=GiB)
    return build_plan(spec, serve, NO_WEIGHTS, engine=EngineSpec(engine))


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(sorted(FAMILIES)), st.integers(1, 200_000), st.integers(1, 200_000),
       st.integers(1, 64), st.integers(1, 64))
def test_monotonic_never_above_the_device_and_a_state_constant_in_context(
        family_specs, model_type, a, b, n, m) -> None:
    spec = family_specs[model_type]
    short, long = sorted((a, b))
    few, many = sorted((n, m))
    assert _plan(spec, short, few).cache_in_use_bytes <= _plan(spec, long, few).cache_in_use_bytes
    assert _plan(spec, short, few).cache_in_use_bytes <= _plan(spec, short, many).cache_in_use_bytes
    assert _plan(spec, long, few).memory_ceiling_requests <= \
        _plan(spec, short, few).memory_ceiling_requests
    assert _plan(spec, short, 1).state_bytes_per_request == \
        _plan(spec, long, 1).state_bytes_per_request > 0
    for engine in ("plain", "vllm"):
        result = _plan(spec, short, few, engine)
        assert not result.fits or result.committed_bytes <= result.device_bytes
