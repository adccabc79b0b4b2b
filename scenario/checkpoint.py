"""A quantized checkpoint's formats, their bytes, and what vLLM holds on each GPU generation
(ledger/residency.py) for the release the Scenario names; a deployment vLLM would refuse on
its GPU is refused here in one line, naming what is missing."""

from dataclasses import dataclass
from typing import TYPE_CHECKING

from servecap.ledger.devices import find as find_device
from servecap.ledger.devices import sm_version
from servecap.ledger.engines import VLLM
from servecap.ledger.errors import SpecError
from servecap.ledger.vllm_versions import NEWEST_READ, choose, parse_version
from servecap.ledger.weights import FormatShare, weight_bytes
from servecap.model_configs import LoadedModel

from .engine import engine_text, implied_engine
from .serving import weight_dtype_asked
from .spec import Scenario

if TYPE_CHECKING:  # the residency tables load only for a quantized checkpoint
    from servecap.ledger.residency import Residency


@dataclass(frozen=True)
class CheckpointFormats:
    """producer: the format family (modelopt, compressed-tensors, ...); shares: each format's
    parameters, values and scales; checkpoint_bytes: weights + scales of the whole checkpoint;
    release: the vLLM release whose rules give `rows`; sm: the planned GPU's capability."""

    producer: str
    shares: tuple[FormatShare, ...]
    checkpoint_bytes: int
    release: str
    rows: tuple["Residency", ...]
    device: str | None = None
    sm: int | None = None

    @property
    def on_device(self) -> "Residency | None":
        if self.sm is None:
            return None
        from servecap.ledger.quant_kernels import generation_of

        name = generation_of(self.sm)
        return next((r for r in self.rows if r.generation == name), None)


def checkpoint_formats(scenario: Scenario, loaded: LoadedModel) -> CheckpointFormats | None:
    """None for an unquantized checkpoint or one planned at another dtype (--weight-dtype)."""
    spec = loaded.spec
    if weight_dtype_asked(scenario, loaded) is not None or not spec.has_architecture:
        return None
    found = loaded.file_weights
    if found is not None and found.gguf:
        return _gguf(scenario, found)
    if spec.quant is None:
        return None
    from servecap.ledger.residency import by_generation

    formula = weight_bytes(spec, 16, spec.quant)
    total = (found.param_bytes + found.metadata_bytes) if found is not None else \
        formula.param_bytes + formula.metadata_bytes
    version = _release(scenario)
    return CheckpointFormats(spec.quant.producer.split(":")[0] or spec.quant.method,
                             formula.by_format, total, ".".join(map(str, version)),
                             by_generation(spec, 16, version, total), *_device(scenario))


def _gguf(scenario: Scenario, found) -> CheckpointFormats:
    """A GGUF file: its ggml types' bytes, held as stored (llama.cpp offloads them so too)."""
    from servecap.ledger.residency import gguf_by_generation

    version, total = _release(scenario), found.param_bytes
    shares = tuple(FormatShare(t, round(b * 8 / max(n, 1)), n, b, 0)
                   for t, b, _, n in found.by_dtype)
    return CheckpointFormats("gguf", shares, total, ".".join(map(str, version)),
                             gguf_by_generation(version, total), *_device(scenario))


def _device(scenario: Scenario) -> tuple[str | None, int | None]:
    device = find_device(scenario.device.name) if scenario.device.name else None
    return (device.name, sm_version(device.name)) if device is not None else (None, None)


def _release(scenario: Scenario) -> tuple[int, ...]:
    """The vLLM release named (vllm==X.Y), else the newest whose source was read."""
    if implied_engine(scenario) != VLLM:
        return NEWEST_READ
    asked = choose(engine_text(scenario)).asked
    return NEWEST_READ if asked == "vllm" else parse_version(asked)


def refuse_where_vllm_would(report: CheckpointFormats | None, scenario: Scenario) -> None:
    """vLLM on a GPU its release refuses the checkpoint on: one line, exit 2."""
    row = report.on_device if report is not None else None
    if row is None or row.runs or implied_engine(scenario) != VLLM:
        return
    raise SpecError("--device", report.device, f"vLLM {report.release} does not run this "
                    f"{report.producer} checkpoint on {row.generation} (SM{report.sm}): "
                    f"{row.how}")
