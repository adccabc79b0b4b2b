"""One ledger per rank: tensor-parallel shards, vLLM's pipeline split, the binding rank."""

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servecap.ledger.engines import EngineSpec
from servecap.ledger.errors import SpecError
from servecap.ledger.kv import Shard, kv_bytes_per_token
from servecap.ledger.ranks import Parallel, build_deployment
from servecap.ledger.serve import ServeSpec
from servecap.ledger.sharding import pp_partition, rank_inventory, stages
from servecap.ledger.units import GiB
from servecap.ledger.weights import weight_bytes
from servecap.model_configs import load_model

H100 = 85_028_896_768


def spec(name):
    return load_model(name).spec


def rank_weight_bytes(name, tp, stage=None):
    model = spec(name)
    return weight_bytes(model, 16, None, rank_inventory(model, tp, stage)).param_bytes


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_llama_8b_weights_per_tp_rank(tp):
    """Embedding, lm_head and every matmul split tp ways; the 266,240 norm weights replicate."""
    sharded = 128_256 * 4096 * 2 + 32 * (2 * 4096 * 4096 + 2 * 1024 * 4096 + 3 * 14_336 * 4096)
    assert rank_weight_bytes("llama-3.1-8b", tp) == 2 * (sharded // tp + 266_240)


def test_tp2_weights_match_vllm_log():
    """vLLM vllm PR 10511: Meta-Llama-3-8B 'model weights take 14.96GiB', with -tp 2 '7.48GiB'."""
    assert f"{rank_weight_bytes('llama-3.1-8b', 1) / GiB:.2f}" == "14.96"
    assert f"{rank_weight_bytes('llama-3.1-8b', 2) / GiB:.2f}" == "7.48"


@pytest.mark.parametrize(("tp", "per_token"), [(1, 131_072), (2, 65_536), (4, 32_768),
                                               (8, 16_384)])
def test_kv_heads_split_by_tp(tp, per_token):
    assert kv_bytes_per_token(spec("llama-3.1-8b"), 16, Shard(tp)) == per_token


def test_kv_heads_replicated_when_fewer_than_tp():
    """Qwen3-30B-A3B has 4 KV heads: at tp 8 every rank holds ceil(4/8) = 1 head, not 1/2."""
    model = spec("qwen3-30b-a3b")
    assert kv_bytes_per_token(model, 16, Shard(8)) == 48 * 2 * 1 * 128 * 2
    assert kv_bytes_per_token(model, 16, Shard(4)) == 48 * 2 * 1 * 128 * 2
    assert kv_bytes_per_token(model, 16, Shard(2)) == 48 * 2 * 2 * 128 * 2


def test_replicated_kv_projection_weights():
    model = spec("qwen3-30b-a3b")
    k_proj = [g for g in rank_inventory(model, 8) if g.name == "self_attn.k_proj"][0]
    assert k_proj.rows == 128  # one full head per rank


def test_mla_latent_is_not_sharded():
    model = spec("deepseek-v3")
    assert kv_bytes_per_token(model, 16, Shard(8)) == kv_bytes_per_token(model, 16) == 70_272


@pytest.mark.parametrize(("layers", "pp", "parts"), [
    (32, 2, (16, 16)), (80, 4, (20, 20, 20, 20)), (61, 2, (31, 30)), (61, 4, (15, 15, 16, 15)),
    (32, 3, (11, 11, 10)), (42, 4, (10, 11, 11, 10)),
])
def test_pipeline_split_like_vllm(layers, pp, parts):
    """get_pp_indices: leftover layers go to the stages before the last."""
    assert pp_partition(layers, pp) == parts
    assert sum(len(s.layers) for s in stages(layers, pp)) == layers


@pytest.mark.parametrize("pp", [2, 4])
def test_stage_weights_add_up_and_place_embedding_and_head(pp):
    whole = rank_weight_bytes("llama-3.1-70b-instruct", 1)
    parts = [rank_weight_bytes("llama-3.1-70b-instruct", 1, s) for s in stages(80, pp)]
    assert sum(parts) == whole
    assert parts[-1] - parts[0] == 8192 * 2  # lm_head matches the embedding; + final norm
    if pp > 2:
        assert parts[0] - parts[1] == 128_256 * 8192 * 2  # a middle stage has neither


def test_tied_model_last_stage_holds_its_own_head():
    model = spec("llama-3.2-1b-instruct")
    whole = rank_weight_bytes("llama-3.2-1b-instruct", 1)
    parts = [rank_weight_bytes("llama-3.2-1b-instruct", 1, s) for s in stages(16, 2)]
    assert sum(parts) == whole + model.vocab_size * model.hidden_size * 2


@pytest.mark.parametrize("tp", [3, 5])
def test_tp_must_divide_the_query_heads(tp):
    with pytest.raises(SpecError, match="query heads"):
        build_deployment(spec("llama-3.1-8b"), serve(), parallel=Parallel(tp))


def test_tp_against_kv_heads_that_neither_divide():
    with pytest.raises(SpecError, match="query heads"):
        build_deployment(spec("qwen2.5-7b"), serve(), parallel=Parallel(8))


def serve(context=8192, concurrency=4):
    return ServeSpec(device_bytes=H100, context_tokens=context, concurrency=concurrency)


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_per_rank_ledgers_at_tp(tp):
    deployment = build_deployment(spec("llama-3.1-70b-instruct"), serve(),
                                  parallel=Parallel(tp))
    plan = deployment.plan
    assert len(deployment.stages) == 1 and deployment.stages[0].ranks == tuple(range(tp))
    assert plan.kv_bytes_per_token == 327_680 // tp
    assert plan.line("weights") == rank_weight_bytes("llama-3.1-70b-instruct", tp)
    assert (plan.line("comm_buffers") > 0) == (tp > 1)


def test_comm_buffers_grow_with_tp_over_nvlink_and_stay_small_over_pcie():
    def sizes(link):
        over = replace(serve(), interconnect=link)
        return [build_deployment(spec("llama-3.1-8b"), over, parallel=Parallel(tp)).plan
                .line("comm_buffers") for tp in (2, 4, 8)]
    nvlink, pcie = sizes("nvlink"), sizes("pcie")
    assert nvlink[0] < nvlink[1] < nvlink[2]
    assert pcie == [128 * 2**20] * 3  # no NVLink buffers: NCCL's alone


def test_declared_comm_buffer_replaces_the_estimate():
    plan = build_deployment(spec("llama-3.1-8b"), serve(), parallel=Parallel(2),
                            engine=EngineSpec(comm_buffer_bytes=GiB)).plan
    assert plan.line("comm_buffers") == GiB
    assert next(x for x in plan.lines if x.key == "comm_buffers").measured


@pytest.mark.parametrize("pp", [2, 4])
def test_last_stage_binds_under_pipeline_parallelism(pp):
    """The last stage holds the lm_head and the logits; with even layers it binds."""
    deployment = build_deployment(spec("llama-3.1-70b-instruct"), serve(),
                                  parallel=Parallel(1, pp))
    assert deployment.binding == pp - 1
    assert "lm_head" in deployment.binding_reason and "binds" in deployment.binding_reason
    ceilings = [s.plan.memory_ceiling_requests for s in deployment.stages]
    assert deployment.plan.memory_ceiling_requests == min(ceilings)


def test_uneven_stages_are_shown():
    deployment = build_deployment(spec("deepseek-v3"), serve(), parallel=Parallel(8, 4))
    assert [len(s.stage.layers) for s in deployment.stages] == [15, 15, 16, 15]
    assert [s.plan.kv_bytes_per_token for s in deployment.stages] == \
        [n * 576 * 2 for n in (15, 15, 16, 15)]


def test_vllm_gives_every_rank_the_binding_rank_blocks():
    deployment = build_deployment(spec("llama-3.1-70b-instruct"), serve(),
                                  parallel=Parallel(1, 4), engine=EngineSpec("vllm"))
    blocks = {s.plan.budget.num_gpu_blocks for s in deployment.stages}
    assert len(blocks) == 1


def test_replicas_multiply_devices_and_weights_not_the_ceiling():
    one = build_deployment(spec("llama-3.1-8b"), serve(), parallel=Parallel(2, 1, 1))
    three = build_deployment(spec("llama-3.1-8b"), serve(), parallel=Parallel(2, 1, 3))
    assert three.plan.memory_ceiling_requests == one.plan.memory_ceiling_requests
    assert three.parallel.num_devices == 6
    assert three.weights_bytes_all_devices == 3 * one.weights_bytes_all_devices
    assert three.total_ceiling_requests == 3 * one.plan.memory_ceiling_requests


@given(layers=st.integers(1, 200), pp=st.integers(1, 16))
def test_pipeline_split_properties(layers, pp):
    """Every layer on exactly one stage, stages differ by at most one layer, the last stage
    never holds more than the others."""
    if pp > layers:
        with pytest.raises(SpecError):
            pp_partition(layers, pp)
        return
    parts = pp_partition(layers, pp)
    assert sum(parts) == layers and max(parts) - min(parts) <= 1
    assert parts[-1] == min(parts)


@settings(max_examples=25, deadline=None)
@given(tp=st.sampled_from([1, 2, 4, 8]), pp=st.sampled_from([1, 2, 4]))
def test_ranks_hold_the_whole_model_between_them(tp, pp):
    """Summed over ranks, sharded tensors add up to the model; replicated ones appear tp times."""
    model = spec("llama-3.1-70b-instruct")
    total = sum(weight_bytes(model, 16, None, rank_inventory(model, tp, s)).param_bytes
                for s in stages(80, pp)) * tp
    whole = weight_bytes(model, 16, None).param_bytes
    norms = (80 * 2 + 1) * 8192 * 2
    assert total == whole + norms * (tp - 1)


def test_tp8_with_four_kv_heads_plans_replicated_heads_per_rank():
    """Qwen3-30B-A3B at tp 8 on vLLM: each rank pages 1 KV head (replicated 2x), 128 experts
    each cut to 768/8 = 96 columns, the router whole on every rank."""
    deployment = build_deployment(spec("qwen3-30b-a3b"), serve(), parallel=Parallel(8),
                                  engine=EngineSpec("vllm"))
    plan = deployment.plan
    assert plan.kv_bytes_per_token == 48 * 2 * 1 * 128 * 2
    assert plan.budget.block_bytes == 16 * 2 * 1 * 128 * 2 * 48
    inventory = {g.name: g for g in rank_inventory(spec("qwen3-30b-a3b"), 8)}
    assert inventory["mlp.experts"].rows == 96 and inventory["mlp.router"].rows == 128


def test_held_ranks_show_the_binding_block_count_in_their_pool_line():
    """A rank held to fewer blocks than its pool fits allocates only those; the rest is left."""
    deployment = build_deployment(load_model("llama-3.1-70b-instruct").spec,
                                  ServeSpec(device_bytes=80 * GiB, context_tokens=8192,
                                            concurrency=1),
                                  parallel=Parallel(4, 2), engine=EngineSpec("vllm"))
    held = deployment.plan.budget.num_gpu_blocks
    for item in deployment.stages:
        plan = item.plan
        assert plan.budget.num_gpu_blocks == held
        assert plan.line("kv_cache") + plan.line("kv_pool_spare") == \
            held * plan.budget.block_bytes
        assert f"{held:,} blocks" in next(x.source for x in plan.lines
                                          if x.key == "kv_pool_spare")
