"""A Scenario's LoRA slots (vLLM's --enable-lora and its knobs) as the ledger's LoraSpec, under
the rules of the vLLM release the plan follows."""

from servecap.ledger.engines import PLAIN, VLLM
from servecap.ledger.errors import SpecError
from servecap.ledger.lora import NEWEST_RULES, LoraSpec
from servecap.ledger.vllm_versions import choose, parse_version

from .engine import engine_text, implied_engine
from .spec import Lora, Scenario

# --lora-dtype as vLLM spells it (LoRADType: auto, float16, bfloat16)
LORA_DTYPES = {"auto": None, "float16": "fp16", "bfloat16": "bf16"}
LORA_KNOBS = ("max_loras", "max_lora_rank", "max_cpu_loras", "lora_target_modules",
              "fully_sharded_loras", "lora_dtype")


def lora_spec(scenario: Scenario, model_dtype: str) -> LoraSpec | None:
    """None without --enable-lora; a knob given without it is an error (vLLM would ignore it,
    and a plan that silently drops it answers another question)."""
    lora = scenario.lora
    if not lora.enable_lora:
        _check_unused(lora)
        return None
    engine = implied_engine(scenario)
    if engine not in (PLAIN, VLLM):
        raise SpecError("--enable-lora", True, f"LoRA slots are modelled as vLLM allocates "
                        f"them (--engine vllm or plain), not {engine}'s own adapter pool")
    dtype = LORA_DTYPES.get(str(lora.lora_dtype).lower()) if lora.lora_dtype else None
    if lora.lora_dtype is not None and str(lora.lora_dtype).lower() not in LORA_DTYPES:
        raise SpecError("--lora-dtype", lora.lora_dtype, "auto, float16 or bfloat16")
    defaults = LoraSpec()
    return LoraSpec(max_loras=lora.max_loras or defaults.max_loras,
                    max_lora_rank=lora.max_lora_rank or defaults.max_lora_rank,
                    max_cpu_loras=lora.max_cpu_loras,
                    target_modules=lora.lora_target_modules,
                    fully_sharded=lora.fully_sharded_loras, dtype=dtype or model_dtype,
                    release=release(scenario))


def release(scenario: Scenario) -> tuple[int, ...]:
    """The vLLM release a plan's LoRA rules follow: the one pinned (--engine vllm==X.Y),
    else the newest read."""
    if implied_engine(scenario) != VLLM or not scenario.engine.version:
        return NEWEST_RULES
    asked = choose(engine_text(scenario)).asked
    version = parse_version(asked)
    return version + (0,) * (3 - len(version))


def _check_unused(lora: Lora) -> None:
    for name in LORA_KNOBS:
        value = getattr(lora, name)
        if value not in (None, False):
            shown = " ".join(value) if isinstance(value, tuple) else value
            raise SpecError("--" + name.replace("_", "-"), shown, "applies with --enable-lora "
                            "(vLLM ignores it without): add --enable-lora, or remove it")
