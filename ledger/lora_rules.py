"""vLLM's LoRA rules per release and per model family: the ranks --max-lora-rank takes, which
modules a slot holds and how they are packed, and the extra vocabulary of releases before 0.12.

Read from the release source at each tag (vllm/config/lora.py, or vllm/config.py before 0.10.1:
LoRAConfig; vllm/model_executor/models/<family>.py: the ForCausalLM class's
packed_modules_mapping and embedding_modules; vllm/lora/utils.py get_supported_lora_modules:
every linear layer, plus the names embedding_modules lists)."""

from dataclasses import dataclass

from .errors import SpecError

# --max-lora-rank as each release takes it: possible_max_ranks (vllm/config.py at v0.6.3,
# v0.8.0), then the MaxLoRARanks literal (vllm/config/lora.py at v0.11.1 .. v0.33.0).
RANKS = (((0, 0, 0), (8, 16, 32, 64, 128, 256)),
         ((0, 8, 0), (8, 16, 32, 64, 128, 256, 320, 512)),
         ((0, 11, 1), (1, 8, 16, 32, 64, 128, 256, 320, 512)))
# lora_extra_vocab_size (default 256) sized extra vocabulary rows for adapters until v0.12.0
# removed it (vllm/config/lora.py at v0.11.2: 'Will be removed in v0.12.0'); lm_head's LoRA B
# was padded to lora_vocab_padding_size, 256 on CUDA (platforms get_lora_vocab_padding_size).
EXTRA_VOCAB_UNTIL = (0, 12, 0)
EXTRA_VOCAB_SIZE = 256
LORA_VOCAB_PADDING = 256
# --lora-target-modules (LoRAConfig.target_modules) exists from v0.19.0
TARGET_MODULES_FROM = (0, 19, 0)
# V0's runner from the memory_profiling rows (0.6.5) to 0.7.x wraps the model for LoRA after the
# DeviceMemoryProfiler that measures the weights (vllm/worker/model_runner.py load_model at
# v0.6.5 and v0.7.1: 'Loading model weights took' is logged before create_lora_manager), and the
# profile measures the torch peak from after them: the slots are in no term the pool subtracts,
# so the pool ignores --max-loras and --max-lora-rank (vllm issue 14450, 2025-03-07: 'using
# different LoRa Rank and Max LoRas did not affect the number of kv cache blocks'; fixed for V0
# by PR 14469, v0.8.0). The V1 runner loads the LoRA model inside the profiler (v1/worker/
# gpu_model_runner.py load_model at v0.8.0), and 0.6.3 / 0.6.4 measure the device-wide drop or
# the torch allocation peak, which hold the slots.
PROFILE_MISSES_SLOTS = ("v0", "profiled")  # VllmRow (formula, profile)
# LogitsProcessorWithLoRA.create_lora_weights refuses larger vocabularies
MAX_VOCAB = 258048  # from v0.12.0 ('vocab size must be <= 258048')
MAX_VOCAB_BEFORE_012 = 257024  # before ('32000 >= vocab_size <= 257024', read as v > 257024)


@dataclass(frozen=True)
class Family:
    """How vLLM wraps one model family: the q/k/v and gate/up slices a packed projection holds
    (3 and 2 for separate q_proj, k_proj, v_proj, gate_proj, up_proj in the checkpoint; 1 and
    1 where the checkpoint stores qkv_proj and gate_up_proj fused, Phi-3), and whether the
    embedding and lm_head hold LoRA slots too (embedding_modules not empty)."""

    qkv_slices: int
    gate_up_slices: int
    embeddings: bool
    source: str


_LLAMA = Family(3, 2, True, "vllm/model_executor/models/llama.py LlamaForCausalLM")
_NO_EMBED = "embedding_modules empty: embed_tokens and lm_head hold no slots"
# model_type -> ((from version, Family), ...): the last entry at or before the release applies
FAMILIES = {
    "llama": (((0, 0, 0), _LLAMA),),
    "mistral": (((0, 0, 0), Family(3, 2, True, "run as LlamaForCausalLM; from v0.15.0 "
                                   "MistralForCausalLM(LlamaForCausalLM)")),
                ((0, 30, 0), Family(3, 2, False, "vllm/model_executor/models/mistral.py "
                                    f"MistralForCausalLM: {_NO_EMBED}"))),
    "qwen2": (((0, 0, 0), Family(3, 2, False, "vllm/model_executor/models/qwen2.py "
                                 f"Qwen2ForCausalLM: {_NO_EMBED}")),),
    "qwen3": (((0, 0, 0), Family(3, 2, False, "vllm/model_executor/models/qwen3.py "
                                 f"Qwen3ForCausalLM: {_NO_EMBED}")),
              ((0, 16, 0), Family(3, 2, True, "vllm/model_executor/models/qwen3.py "
                                  "Qwen3ForCausalLM: embed_tokens and lm_head listed"))),
    "gemma2": (((0, 0, 0), Family(3, 2, False, "vllm/model_executor/models/gemma2.py "
                                  f"Gemma2ForCausalLM: {_NO_EMBED}")),),
    "gemma3_text": (((0, 0, 0), Family(3, 2, False, "vllm/model_executor/models/gemma3.py "
                                       f"Gemma3ForCausalLM: {_NO_EMBED}")),),
    "phi3": (((0, 0, 0), Family(3, 2, True, "run as LlamaForCausalLM before v0.6.2")),
             ((0, 6, 2), Family(1, 1, True, "vllm/model_executor/models/phi3.py "
                                "Phi3ForCausalLM(LlamaForCausalLM): qkv_proj and "
                                "gate_up_proj fused in the checkpoint"))),
}


def family(model_type: str, release: tuple[int, ...], model: str) -> Family:
    """The family's rule at this release; a model type not read fails closed."""
    rows = FAMILIES.get(model_type)
    if rows is None:
        raise SpecError("--enable-lora", model_type or model, "LoRA slots are modelled for "
                        "the dense model types " + ", ".join(sorted(FAMILIES)) + f" ({model} "
                        "is not one: MoE experts, MLA and state layers hold slots of their "
                        "own); remove --enable-lora to plan without them")
    return [fam for start, fam in rows if start <= release][-1]


def allowed_ranks(release: tuple[int, ...]) -> tuple[int, ...]:
    return [ranks for start, ranks in RANKS if start <= release][-1]


def check_rank(rank: int, release: tuple[int, ...]) -> int:
    """--max-lora-rank must be one the release takes (vLLM pads every adapter up to it)."""
    ranks = allowed_ranks(release)
    if rank not in ranks:
        raise SpecError("--max-lora-rank", rank, f"one of {', '.join(map(str, ranks))} "
                        f"(vLLM {_tag(release)}); every adapter's rank is padded up to it")
    return rank


def extra_vocab(release: tuple[int, ...], fam: Family) -> int:
    """Extra vocabulary rows per adapter (256) where the release and family have them."""
    return EXTRA_VOCAB_SIZE if release < EXTRA_VOCAB_UNTIL and fam.embeddings else 0


def check_vocab(vocab_size: int, release: tuple[int, ...], fam: Family) -> None:
    """lm_head's LoRA wrapper refuses a vocabulary past the release's limit."""
    if not fam.embeddings:
        return
    limit = MAX_VOCAB if release >= EXTRA_VOCAB_UNTIL else MAX_VOCAB_BEFORE_012
    if vocab_size > limit:
        raise SpecError("--enable-lora", f"vocab_size {vocab_size:,}", f"vLLM {_tag(release)} "
                        f"refuses LoRA on a vocabulary above {limit:,} (lm_head's slots)")


# the module names --lora-target-modules takes here: the checkpoint's and the packed ones
TARGETS = ("q_proj", "k_proj", "v_proj", "qkv_proj", "o_proj", "gate_proj", "up_proj",
           "gate_up_proj", "down_proj", "embed_tokens", "lm_head")


def check_targets(targets: tuple[str, ...] | None, release: tuple[int, ...]) -> None:
    """The flag exists at this release and names modules a dense decoder has."""
    if targets is None:
        return
    if release < TARGET_MODULES_FROM:
        raise SpecError("--lora-target-modules", " ".join(targets), "exists from vLLM "
                        f"{_tag(TARGET_MODULES_FROM)} (this plan follows {_tag(release)})")
    unknown = [name for name in targets if name not in TARGETS]
    if unknown or not targets:
        raise SpecError("--lora-target-modules", " ".join(targets), "module names among "
                        + ", ".join(TARGETS))


def check_edge_targets(targets: tuple[str, ...] | None, fam: Family) -> None:
    """A family whose embedding and lm_head hold no slots is not planned with them targeted."""
    named = [t for t in targets or () if t in ("embed_tokens", "lm_head")]
    if named and not fam.embeddings:
        raise SpecError("--lora-target-modules", " ".join(targets), f"{', '.join(named)}: "
                        f"not modelled for this family ({fam.source})")


def _tag(release: tuple[int, ...]) -> str:
    return "v" + ".".join(map(str, release))


def slots_in_budget(row) -> bool:
    """Whether the release's profile subtracts the LoRA slots from its KV pool (a VllmRow; not
    on V0's memory_profiling rows, PROFILE_MISSES_SLOTS: there they sit outside
    gpu_memory_utilization, beside the pool)."""
    return (row.formula, row.profile) != PROFILE_MISSES_SLOTS
