"""The refusal for a model family servecap does not plan: it names the vLLM model class (and its
module) that builds the architecture, from vLLM's own registry (vllm_registry.py), or says
that the release has none."""

from servecap.ledger.errors import SpecError

from .vllm_registry import CLASSES, REMOVED, TAG

MODELS = "vllm/model_executor/models"


def vllm_class(architecture: str | None) -> str:
    """How vLLM serves `architecture` at TAG, in words."""
    if architecture in CLASSES:
        module, cls = CLASSES[architecture]
        named = "it" if cls == architecture else architecture
        return f"vLLM {TAG} builds {named} with {cls} ({MODELS}/{module}.py)"
    if architecture in REMOVED:
        return (f"vLLM {TAG} no longer serves {architecture} (last in v{REMOVED[architecture]}, "
                f"{MODELS}/registry.py _PREVIOUSLY_SUPPORTED_MODELS)")
    if architecture:
        return f"vLLM {TAG} has no model class for {architecture} ({MODELS}/registry.py)"
    return "the config names no architectures to find vLLM's model class by"


def unsupported(cfg) -> SpecError:
    """model_type is not one servecap plans: the error names what vLLM would build."""
    from .hf import SUPPORTED

    archs = cfg.architectures or []
    arch = archs[0] if archs else None
    need = ("servecap would need that class's cache spec and weights" if arch in CLASSES
            else "there is no vLLM model class for servecap to follow")
    return SpecError("model_type", cfg.model_type, f"not planned by servecap: {vllm_class(arch)}"
                     f"; {need}. Planned: " + ", ".join(SUPPORTED))
