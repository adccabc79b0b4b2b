"""Each rank's weights under tensor and expert parallelism add up to the checkpoint: over every
official config in tests/fixtures, tp ranks together hold at least the whole model, and no
more than what vLLM replicates (norms, KV heads when tp > KV heads, the vocabulary's padding)
adds. A module the split rules miss is replicated on every rank (Mamba-2 and gated-DeltaNet
mixers once were: Qwen3.5-27B at tp 8 planned 16.5 GB a GPU for a 53.8 GB model), and one
they drop vanishes (a quantized MoE's experts under expert parallelism once did)."""

from dataclasses import replace
from pathlib import Path

import pytest

from servecap.ledger.arch import inventory
from servecap.ledger.experts import ExpertSplit
from servecap.ledger.ranks import Parallel, build_deployment
from servecap.ledger.serve import ServeSpec
from servecap.ledger.sharding import rank_inventory
from servecap.ledger.units import GiB
from servecap.model_configs import load_model

CONFIGS = sorted(p.parent for p in Path("tests/fixtures/configs").glob("*/config.json"))
SERVE = ServeSpec(context_tokens=4096, concurrency=1, device_bytes=4000 * GiB, safety_bytes=0,
                  weight_dtype="bf16")
# the most replication adds among the fixtures: Gemma-4 E2B at tp 8 (KV heads, per-layer
# embeddings' norms), 6.3 %
MOST_REPLICATED = 1.07


def _weights(spec, parallel: Parallel | None = None) -> int:
    if parallel is None:
        return build_deployment(spec, SERVE).plan.line("weights")
    return build_deployment(spec, SERVE, parallel=parallel).plan.line("weights")


def _spec(path: Path):
    try:
        return load_model(str(path)).spec
    except Exception as error:  # a family refused by name is another test's business
        pytest.skip(f"{path.name}: {error}")


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_tensor_parallel_ranks_hold_the_whole_model_once(path: Path) -> None:
    spec = _spec(path)
    whole = _weights(spec)
    checked = 0
    for tp in (2, 4, 8):
        try:
            rank = _weights(spec, Parallel(tp, 1, 1, False))
        except Exception:  # tp does not divide the heads: refused by its own rule
            continue
        checked += 1
        assert whole * 0.9999 <= tp * rank <= whole * MOST_REPLICATED, (tp, rank, whole)
        if spec.moe is not None:  # whole experts, the binding rank holding the most
            ep = _weights(spec, Parallel(tp, 1, 1, True))
            assert tp * ep >= whole * 0.9999, (tp, ep, whole)
    if not checked:
        pytest.skip(f"{path.name}: no tp of 2, 4, 8 divides its heads")


def _mixer_rows(spec, tp: int) -> int:
    group = next(g for g in rank_inventory(spec, tp) if g.name == "mixer.in_proj")
    return group.rows


def test_mamba2_in_proj_splits_as_vllms_merged_column_parallel_layer() -> None:
    """Nemotron-H-56B (mamba_mixer2.py @v0.11.0): in_proj's outputs [intermediate,
    intermediate, n_groups x d_state, n_groups x d_state, heads] = [16384, 16384, 2048, 2048,
    256], each cut by tp: 4,640 rows a rank at tp 8."""
    spec = _spec(Path("tests/fixtures/configs/nvidia--Nemotron-H-56B-Base-8K"))
    assert _mixer_rows(spec, 1) == 16384 * 2 + 2048 * 2 + 256
    assert _mixer_rows(spec, 8) == (16384 * 2 + 2048 * 2 + 256) // 8 == 4640
    out = next(g for g in rank_inventory(spec, 8) if g.name == "mixer.out_proj")
    assert (out.rows, out.cols) == (8192, 16384 // 8)  # RowParallelLinear: input cut


def test_mamba2_with_one_group_keeps_it_whole_on_every_rank() -> None:
    """extra_groups_for_head_shards: n_groups = 1 at tp 4 becomes 4 groups, one a rank, so
    each rank's B and C are d_state wide, not d_state / 4."""
    spec = _spec(Path("tests/fixtures/configs/nvidia--Nemotron-H-56B-Base-8K"))
    st = replace(spec.state, n_groups=1, conv_dim=spec.state.intermediate + 2 * 256)
    one = replace(spec, state=st)
    assert _mixer_rows(one, 4) == (2 * 16384 + 256) // 4 + 2 * 256


def test_gated_deltanet_in_proj_splits_by_head() -> None:
    """Qwen3.5-27B (qwen3_next.py in_proj_qkvz + in_proj_ba, ColumnParallelLinear): q and k
    16 heads x 128, v and z 48 x 128, b and a 48: 16,480 rows, 2,060 a rank at tp 8."""
    spec = _spec(Path("tests/fixtures/configs/Qwen--Qwen3.5-27B"))
    assert _mixer_rows(spec, 1) == 2 * 2048 + 2 * 6144 + 96 == 16480
    assert _mixer_rows(spec, 8) == 2060


def test_sharded_mixer_keeps_each_projections_checkpoint_format() -> None:
    """A mixed-format checkpoint stores in_proj's parts in their own formats (Qwen3.6-27B
    NVFP4: FP8 in_proj_qkv/z beside bf16 in_proj_b/a): a rank's share keeps them, so the
    ranks' fp8 parameters add up to the checkpoint's."""
    from servecap.ledger.weights import weight_bytes

    spec = _spec(Path("tests/fixtures/configs/nvidia--Qwen3.6-27B-NVFP4"))
    whole = {f.name: f.num_parameters for f in weight_bytes(spec, 16, spec.quant).by_format}
    rank = {f.name: f.num_parameters
            for f in weight_bytes(spec, 16, spec.quant, rank_inventory(spec, 2)).by_format}
    assert 2 * rank["fp8"] == whole["fp8"]


def test_expert_split_and_mixer_split_compose() -> None:
    """Qwen3.5-35B-A3B (gated DeltaNet and 256 experts) at tp 4 with expert parallelism:
    the ranks' parameters add to the whole model's, replication aside."""
    spec = _spec(Path("tests/fixtures/configs/Qwen--Qwen3.5-35B-A3B"))
    whole = sum(g.numel for g in inventory(spec))
    ranks = sum(sum(g.numel for g in rank_inventory(spec, 4,
                                                    experts=ExpertSplit(4, True, r)))
                for r in range(4))
    assert whole <= ranks <= whole * MOST_REPLICATED
