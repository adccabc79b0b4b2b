"""Checkpoints written by transformers itself run exactly: greedy tokens identical and fp32 logits
within 1e-4 of transformers' own forward pass, in both config formats, through every engine path
(batched, chunked, prefix-cached, preempted), windowed models' blocks allocated chunk by chunk
(and freed out of the window when every layer is windowed)."""

import json
import random

import pytest
import torch

transformers = pytest.importorskip("transformers")

from hf_reference import hf_greedy  # noqa: E402

from servecap.ledger.errors import SpecError  # noqa: E402
from servecap.model_configs import load_model  # noqa: E402
from servecap.runtime.engine import Engine, EngineConfig  # noqa: E402
from servecap.runtime.kv_pool import KVPool  # noqa: E402
from servecap.runtime.weights import load_decoder  # noqa: E402

TOLERANCE = 1e-4
NUM_OUTPUT = 6
DIMS = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, vocab_size=256, max_position_embeddings=64)
ROPES = {  # rope_type -> rope_parameters beyond rope_theta
    "default": {},
    "linear": {"factor": 2.0},
    "dynamic": {"factor": 2.0},
    "llama3": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 16},
    "yarn": {"factor": 4.0, "original_max_position_embeddings": 16},
    "longrope": {"short_factor": [1.0 + i / 8 for i in range(8)],
                 "long_factor": [1.0 + i for i in range(8)],
                 "original_max_position_embeddings": 16},
}
# (architecture, config class, extra config, rope_type, rope_theta)
CASES = {
    "llama": ("LlamaForCausalLM", "LlamaConfig", {}, "default", 10000.0),
    "llama-tied": ("LlamaForCausalLM", "LlamaConfig", {"tie_word_embeddings": True},
                   "default", 10000.0),
    "qwen2": ("Qwen2ForCausalLM", "Qwen2Config", {}, "default", 1000000.0),
    "qwen3": ("Qwen3ForCausalLM", "Qwen3Config", {"head_dim": 16}, "default", 1000000.0),
    "mistral": ("MistralForCausalLM", "MistralConfig", {"sliding_window": 8}, "default", 1e4),
    # local and global layers (Gemma-2/3 style: windowed and full attention in one model)
    "qwen2-local-global": ("Qwen2ForCausalLM", "Qwen2Config", {
        "use_sliding_window": True, "sliding_window": 8, "max_window_layers": 1}, "default",
        1000000.0),
    **{f"llama-{kind}": ("LlamaForCausalLM", "LlamaConfig", {}, kind, 500000.0)
       for kind in ROPES if kind != "default"},
}
# dynamic NTK and longrope depend on the length at each forward call (as in transformers'
# cached generation), so they are compared unchunked and without cross-request prefix reuse
LENGTH_DEPENDENT = {"llama-dynamic", "llama-longrope"}


def _prompts(count: int = 4, shared: int = 0) -> list[list[int]]:
    """Lengths 5..29 cross the 8-token window and the 16-token original context."""
    rng = random.Random(5)
    prefix = [rng.randrange(256) for _ in range(shared)]
    return [prefix + [rng.randrange(256) for _ in range(5 + 8 * i)] for i in range(count)]


def _save(case: str, directory, old_format: bool):
    arch, config_class, extra, kind, theta = CASES[case]
    torch.manual_seed(0)
    config = getattr(transformers, config_class)(
        **DIMS, **extra, rope_parameters={"rope_type": kind, "rope_theta": theta, **ROPES[kind]})
    hf = getattr(transformers, arch)(config).float().eval()
    hf.save_pretrained(directory, safe_serialization=True)
    if old_format:
        _to_old_format(directory / "config.json")
    return getattr(transformers, arch).from_pretrained(directory).float().eval()


def _to_old_format(path) -> None:
    """Top-level rope_theta and rope_scaling ('type' for the oldest types), as older releases
    wrote them."""
    config = json.loads(path.read_text())
    params = config.pop("rope_parameters")
    config["rope_theta"] = params.pop("rope_theta")
    kind = params.pop("rope_type")
    key = "type" if kind in ("linear", "dynamic") else "rope_type"
    config["rope_scaling"] = None if kind == "default" else {key: kind, **params}
    path.write_text(json.dumps(config))


def _engine_run(model, prompts, monkeypatch, num_blocks=128, staggered=False, **config):
    from hf_reference import engine_logits

    engine = Engine(model, KVPool(model.spec, num_blocks, 4, "fp32"), EngineConfig(**config))
    return engine_logits(engine, prompts, NUM_OUTPUT, monkeypatch, staggered)


@pytest.fixture(scope="module", params=sorted(CASES))
def checkpoint(request, tmp_path_factory):
    directory = tmp_path_factory.mktemp(request.param)
    torch.set_num_threads(1)
    hf = _save(request.param, directory, old_format=False)
    return request.param, directory, hf


def _loaded(directory):
    return load_decoder(load_model(str(directory)).spec, directory, "fp32")


def _check(model, hf, prompts, monkeypatch, **config) -> list:
    """Engine tokens equal transformers' and logits agree; returns the engine's records."""
    records, logits = _engine_run(model, prompts, monkeypatch, **config)
    worst = 0.0
    for record, rows, prompt in zip(records, logits, prompts, strict=True):
        tokens, reference = hf_greedy(hf, prompt, NUM_OUTPUT)
        assert record.output_token_ids == tokens, (prompt, record.output_token_ids, tokens)
        worst = max(worst, float((rows - reference).abs().max()))
    assert worst < TOLERANCE
    return records


def test_batched_equals_transformers(checkpoint, monkeypatch) -> None:
    _, directory, hf = checkpoint
    _check(_loaded(directory), hf, _prompts(), monkeypatch)


def test_old_config_format_equals_transformers(checkpoint, tmp_path, monkeypatch) -> None:
    """The same weights with top-level rope_theta / rope_scaling give the same outputs; and
    transformers reads that format back to the same model."""
    case, directory, hf = checkpoint
    for name in ("config.json", "model.safetensors"):
        (tmp_path / name).write_bytes((directory / name).read_bytes())
    _to_old_format(tmp_path / "config.json")
    _check(_loaded(tmp_path), hf, _prompts(2), monkeypatch)


def test_chunked_prefix_cached_and_preempted_equal_transformers(checkpoint, monkeypatch):
    """Chunks of 8 tokens; prompts sharing a 12-token prefix served from the cache; a pool too
    small for all at once, so decode growth preempts and recomputes."""
    case, directory, hf = checkpoint
    if case in LENGTH_DEPENDENT:
        pytest.skip("the RoPE depends on the forward call's length: chunking changes it in "
                    "transformers too")
    model = _loaded(directory)
    _check(model, hf, _prompts(), monkeypatch, max_num_batched_tokens=8)
    records = _check(model, hf, _prompts(3, shared=12), monkeypatch, staggered=True)
    assert all(r.num_cached_tokens >= 12 for r in records[1:])
    records = _check(model, hf, _prompts(), monkeypatch, num_blocks=14,
                     reserve_full_context=False)
    assert any(r.num_preemptions for r in records)


@pytest.mark.parametrize("rope,field", [
    ({"rope_type": "mrope", "rope_theta": 1e4}, "rope_parameters.rope_type"),
    ({"rope_type": "linear", "rope_theta": 1e4, "factor": 2.0, "mrope_section": [2, 2]},
     "rope_parameters.mrope_section"),
    ({"rope_type": "llama3", "rope_theta": 1e4, "factor": 8.0}, "rope_parameters.high_freq_factor"),
    ({"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.5},
     "partial_rotary_factor"),
])
def test_unimplemented_rope_is_refused_by_name(tmp_path, rope, field) -> None:
    _save("llama", tmp_path, old_format=False)
    config = json.loads((tmp_path / "config.json").read_text())
    config["rope_parameters"] = rope
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(SpecError) as err:
        _loaded(tmp_path)
    assert err.value.field == field and "config.json" in str(err.value)


def test_mistral_frees_out_of_window_blocks_and_still_equals_transformers(tmp_path,
                                                                         monkeypatch) -> None:
    """Every Mistral layer is windowed, so the engine frees the blocks before each step's
    window (the cases above run with it on); outputs stay transformers' exactly."""
    from servecap.runtime.block_manager import BlockManager
    from servecap.runtime.engine import windowed_everywhere

    hf = _save("mistral", tmp_path, old_format=False)
    model = _loaded(tmp_path)
    assert windowed_everywhere(model.spec) == 8
    freed, real = [], BlockManager.free_out_of_window
    counting = lambda self, *args: freed.append(real(self, *args)) or freed[-1]  # noqa: E731
    with monkeypatch.context() as patch:
        patch.setattr(BlockManager, "free_out_of_window", counting)
        records = _check(model, hf, _prompts(), patch)
    assert all(len(r.output_token_ids) == NUM_OUTPUT for r in records)
    assert sum(freed) > 0


def test_local_global_checkpoint_has_a_windowed_and_a_full_layer(tmp_path) -> None:
    """The local/global case is what it says: layer 0 full, layer 1 windowed (8 tokens), so
    the prompts above (up to 29 tokens) reach past the window in one layer and not the other."""
    _save("qwen2-local-global", tmp_path, old_format=False)
    spec = load_model(str(tmp_path)).spec
    assert spec.attention.layer_kinds == ("full", "sliding")
    assert spec.attention.sliding_window_tokens == 8
