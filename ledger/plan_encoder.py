"""A multimodal model's encoder lines in a plan: the cache and peak the flags ask for
(ledger/encoder.py), the budget vLLM will log, and the note where vLLM profiles an encoder
nobody planned. The tower's weights are ledger/encoders.py's."""

from dataclasses import replace

from .encoder import EncoderBudget, EncoderSpec, encoder_budget, encoder_lines, scheduled
from .engines import VLLM, EngineSpec
from .errors import SpecError
from .kv import Shard
from .lines import Line
from .model import ModelSpec
from .serve import ServeSpec


def encoder_plan(spec: ModelSpec, serve: ServeSpec, shard: Shard, runtime: Line,
                 engine: EngineSpec, model_bytes: int
                 ) -> tuple[tuple[Line, ...], tuple[str, ...]]:
    """The encoder cache and encoder peak lines with the deployment's scheduler values, and
    their notes; without multimodal knobs, no line (vLLM: a note of what its default profile
    would hold)."""
    if not shard.first_stage:  # the tower runs on the first stage
        return (), ()
    if serve.encoder is None:
        return (), _unplanned(spec, serve, shard, engine, model_bytes)
    if spec.vision is None:
        raise SpecError("--limit-mm-per-prompt", spec.architecture or spec.name,
                        "the encoder budget is modelled for Qwen2/2.5/3-VL, Qwen3.5/3.6, "
                        "Gemma-3, Gemma-4, Mistral-3 (Pixtral), Llama-4, InternVL and "
                        "GLM-4.1V/4.5V configs: this model has no vision_config servecap reads")
    return encoder_lines(spec.vision, _scheduled(serve.encoder, serve, shard, model_bytes,
                                                  engine),
                         runtime.num_bytes)


def encoder_profile(spec: ModelSpec, serve: ServeSpec, shard: Shard, engine: EngineSpec,
                    model_bytes: int) -> EncoderBudget | None:
    """The budget and items vLLM will log for this rank: the flags', else (vLLM) its defaults."""
    if not shard.first_stage or spec.vision is None:
        return None
    enc = serve.encoder or (EncoderSpec() if engine.name == VLLM else None)
    if enc is None or enc.skip_profiling:
        return None
    try:
        return encoder_budget(spec.vision, _scheduled(enc, serve, shard, model_bytes, engine))
    except SpecError:  # vLLM's default profile holds a modality not modelled (its note says)
        if serve.encoder is not None:
            raise
        return None


def _scheduled(enc: EncoderSpec, serve: ServeSpec, shard: Shard, model_bytes: int,
               engine: EngineSpec) -> EncoderSpec:
    """The encoder knobs with this rank's scheduler values and, under vLLM, the release's
    profile rules (ledger/vllm_row.py encoder_rows_to_budget, qwen3_video_timestamps)."""
    enc = scheduled(enc, serve.max_num_batched_tokens, serve.context_tokens,
                    serve.max_num_seqs, shard.tensor_parallel_size, model_bytes)
    if engine.name != VLLM:
        return enc
    row = engine.vllm_row
    return replace(enc, rows_to_budget=row.encoder_rows_to_budget,
                   qwen3_video_timestamps=row.qwen3_video_timestamps, holds_inputs=True)


def _unplanned(spec: ModelSpec, serve: ServeSpec, shard: Shard, engine: EngineSpec,
               model_bytes: int) -> tuple[str, ...]:
    if engine.name != VLLM or spec.vision is None:
        return ()
    enc = _scheduled(EncoderSpec(), serve, shard, model_bytes, engine)
    zeros = spec.vision.modalities + (("audio",) if spec.vision.has_audio else ())
    modalities = ", ".join(f'"{m}": 0' for m in zeros)
    try:
        found = encoder_budget(spec.vision, enc)
    except SpecError as why:  # a modality whose budget is not modelled (GLM-4.xV video)
        return (f"not planned: vLLM also profiles this model's vision encoder by default, "
                f"and servecap cannot size that profile ({why.allowed}); "
                f"--limit-mm-per-prompt plans it (docs/encoder_cache.md), "
                f"'{{{modalities}}}' serves text only",)
    return (f"not planned: vLLM also profiles this model's vision encoder by default "
            f"({found.items} {found.modality} items, an encoder cache of "
            f"{found.cache_bytes:,} B beside the runtime peak); --limit-mm-per-prompt plans "
            f"it (docs/encoder_cache.md), '{{{modalities}}}' serves text only",)
