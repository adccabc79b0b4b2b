"""Granite 3.x (model_type granite, vLLM's GraniteForCausalLM) and Phi-1/Phi-2 (model_type phi,
PhiForCausalLM) read as vLLM's classes build them: Granite is Llama-shaped (its multipliers
scale activations and change no memory); Phi has one LayerNorm a layer with biases, biased
q/k/v, dense, fc1/fc2 and lm_head, an ungated MLP and a partial rotary. Each count is checked
against a figure its publisher states; each KV size is written out here from the shape."""

import json
from pathlib import Path

import pytest

from servecap.ledger.arch import count_parameters, inventory
from servecap.ledger.errors import SpecError
from servecap.ledger.kv import kv_bytes_per_token
from servecap.ledger.sharding import rank_inventory
from servecap.model_configs import load_model

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
PHI2 = CONFIGS / "microsoft--phi-2"
FP16_BYTES = 2
TOLERANCE = 0.02

# The Granite 3.1 model card's architecture table (ibm-granite/granite-3.1-1b-a400m-instruct's
# README.md as kept at leok7v/nano-lamma@c16de35338caf09b95babaf32b082f44aaad1883): embedding
# size, layers, attention head size, heads, KV heads, MLP hidden size, and "# Parameters"
# (2.5B, 8.1B), with "shared input/output embeddings". The vocabulary, 49,155, is the same
# release's tokenizer as its granite-3.1-1b-a400m-instruct config.json states (same commit).
# No checkpoint config.json of the dense models was found verbatim, so these are written from
# the card.
CARD = {"2b": (2048, 40, 64, 32, 8, 8192, 2.5e9), "8b": (4096, 40, 128, 32, 8, 12800, 8.1e9)}
GRANITE_VOCAB = 49155


def granite_config(size: str, **extra) -> dict:
    hidden, layers, _, heads, kv_heads, inter, _ = CARD[size]
    return {"architectures": ["GraniteForCausalLM"], "model_type": "granite",
            "hidden_size": hidden, "num_hidden_layers": layers, "num_attention_heads": heads,
            "num_key_value_heads": kv_heads, "intermediate_size": inter,
            "vocab_size": GRANITE_VOCAB, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
            "attention_multiplier": 0.015625, "embedding_multiplier": 12.0,
            "residual_multiplier": 0.22, "logits_scaling": 8.0, "attention_bias": False,
            "mlp_bias": False, **extra}


def load(tmp_path: Path, data: dict):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    return load_model(str(path)).spec


@pytest.mark.parametrize("size", sorted(CARD))
def test_granite_reads_as_the_card_states_it(tmp_path: Path, size: str) -> None:
    hidden, layers, head_dim, heads, kv_heads, inter, published = CARD[size]
    spec = load(tmp_path, granite_config(size))
    att = spec.attention
    assert (spec.num_layers, spec.hidden_size, spec.intermediate_size) == (layers, hidden, inter)
    assert (att.num_heads, att.num_kv_heads, att.head_dim) == (heads, kv_heads, head_dim)
    assert spec.tie_word_embeddings and spec.gated_mlp and not att.qkv_bias
    assert spec.norms_per_layer == 2 and not (spec.norm_bias or spec.mlp_bias)
    assert abs(count_parameters(spec) - published) <= TOLERANCE * published
    assert kv_bytes_per_token(spec, 16) == 2 * layers * kv_heads * head_dim * 2


def test_granite_multipliers_change_no_memory(tmp_path: Path) -> None:
    scaled = load(tmp_path, granite_config("2b"))
    plain = load(tmp_path, {k: v for k, v in granite_config("2b").items()
                            if not k.endswith(("_multiplier", "_scaling"))})
    assert count_parameters(scaled) == count_parameters(plain)
    assert kv_bytes_per_token(scaled, 16) == kv_bytes_per_token(plain, 16)


def test_granite_unties_its_head_when_the_config_does_not_say(tmp_path: Path) -> None:
    """transformers' GraniteConfig defaults tie_word_embeddings to false: an lm_head of its
    own, vocab x hidden more."""
    data = granite_config("8b")
    del data["tie_word_embeddings"]
    untied, tied = load(tmp_path, data), load(tmp_path, granite_config("8b"))
    assert not untied.tie_word_embeddings
    assert count_parameters(untied) - count_parameters(tied) == GRANITE_VOCAB * 4096


def test_granite_attention_bias_adds_qkv_and_o_proj_biases(tmp_path: Path) -> None:
    """vLLM's GraniteAttention passes bias=attention_bias to qkv_proj and o_proj alike."""
    plain = load(tmp_path, granite_config("2b"))
    biased = load(tmp_path, granite_config("2b", attention_bias=True))
    per_layer = (32 * 64 + 2 * 8 * 64) + 2048  # q, k, v biases, then o_proj's
    assert count_parameters(biased) - count_parameters(plain) == 40 * per_layer


def test_phi2_reads_as_vllms_phi_class_builds_it() -> None:
    spec = load_model(str(PHI2 / "config.json")).spec
    att = spec.attention
    assert (spec.num_layers, spec.hidden_size, spec.vocab_size) == (32, 2560, 51200)
    assert (att.num_heads, att.num_kv_heads, att.head_dim) == (32, 32, 80)
    assert att.rotary_dim == 32  # 80 x partial_rotary_factor 0.4
    assert att.qkv_bias and spec.norm_bias and spec.mlp_bias and spec.lm_head_bias
    assert spec.norms_per_layer == 1 and not spec.gated_mlp and spec.intermediate_size == 10240
    assert not spec.tie_word_embeddings and spec.checkpoint_dtype == "float16"
    names = {g.name for g in inventory(spec)}
    assert {"self_attn.o_proj.bias", "mlp.bias", "lm_head.bias"} <= names


def test_phi2_parameters_equal_its_safetensors_total_size() -> None:
    """total_size 5,559,367,680 B of float16 (index_total_size.SOURCE.md) is 2,779,683,840
    parameters; written out: embed and lm_head (with bias), per layer q/k/v and dense with
    biases, fc1/fc2 with biases, one LayerNorm; the final LayerNorm."""
    total = json.loads((PHI2 / "index_total_size.json").read_text())["metadata"]["total_size"]
    h, inter, vocab, layers = 2560, 10240, 51200, 32
    layer = 4 * (h * h + h) + (h * inter + inter) + (inter * h + h) + 2 * h
    written = vocab * h + layers * layer + 2 * h + vocab * h + vocab
    spec = load_model(str(PHI2 / "config.json")).spec
    assert count_parameters(spec) == written == total // FP16_BYTES


def test_phi2_kv_per_token() -> None:
    spec = load_model(str(PHI2 / "config.json")).spec
    assert kv_bytes_per_token(spec, 16) == 2 * 32 * 32 * 80 * FP16_BYTES


def test_phi_biases_split_as_vllms_parallel_layers_do() -> None:
    """At TP 2 each rank holds half of fc1's bias and of lm_head's (vocabulary-split) bias,
    the whole of fc2's and dense's (row-parallel biases are not split)."""
    spec = load_model(str(PHI2 / "config.json")).spec
    rank = {(g.name, g.layers): g.numel for g in rank_inventory(spec, 2)}
    assert rank[("mlp.bias", (0,))] == 10240 // 2 + 2560
    assert rank[("self_attn.o_proj.bias", (0,))] == 2560
    assert rank[("lm_head.bias", ())] == 51200 // 2


def test_phi_with_qk_layernorm_is_refused_by_the_field(tmp_path: Path) -> None:
    data = {**json.loads((PHI2 / "config.json").read_text()), "qk_layernorm": True}
    with pytest.raises(SpecError) as err:
        load(tmp_path, data)
    assert "qk_layernorm" in str(err.value) and "PhiForCausalLM" in str(err.value)
