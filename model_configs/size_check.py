"""Parameter counts and weight bytes that cannot run away: the architecture's count checked
against what the checkpoint states (its safetensors headers, its index's total_size, a model
file's stated total) and against the size its name states ('120B', 'A12B'); beyond 10 % a
warning says which to trust."""

import re
from dataclasses import replace

from servecap.ledger.arch import active_parameters
from servecap.ledger.errors import SpecError
from servecap.ledger.weights import weight_bytes

WARN = 0.10  # beyond this, a count or a byte total is called out as a warning
NOTE = 0.02  # beyond this, the two counts are said side by side
STATED = re.compile(r"(?<![0-9A-Za-z.])[Aa]?(\d+(?:\.\d+)?)[Bb](?![0-9A-Za-z])")


def with_size_checks(loaded, stated_total_bytes: int | None = None):
    """The loaded model with a note for each check that is off (none when all agree)."""
    spec = loaded.spec
    if not spec.has_architecture:
        return loaded
    try:
        formula = weight_bytes(spec, 16, spec.quant)
    except SpecError:
        return loaded
    notes = _against_checkpoint(formula, loaded.file_weights, spec.quant, stated_total_bytes)
    notes += _against_name(spec, formula.num_parameters, loaded.hub.repo_id if loaded.hub
                           else spec.name)
    return replace(loaded, spec=replace(spec, notes=spec.notes + notes)) if notes else loaded


def _off(got: int, stated: int) -> float:
    return (got - stated) / stated if stated else 0.0


def _against_checkpoint(formula, found, quant, stated_total: int | None) -> tuple[str, ...]:
    planned = formula.param_bytes + formula.metadata_bytes
    total = (found.param_bytes + found.metadata_bytes) if found is not None else stated_total
    if not total:
        return ()
    where = ("its safetensors headers" if found is not None and found.num_files else
             "its safetensors index total_size" if found is not None else
             "the model file's weights_total_size_bytes")
    out = []
    off = _off(planned, total)
    if abs(off) > WARN:
        out.append(f"warning: the architecture's weights ({planned:,} B) are {off:+.1%} from "
                   f"{where} ({total:,} B); the checkpoint's bytes are planned where they "
                   "are read, check the config's quantization and architecture fields")
    if found is not None and found.by_dtype:
        counted = found.parameters(quant.bits if quant is not None and quant.bits < 8 else 4)
        diff = _off(formula.num_parameters, counted)
        if abs(diff) > NOTE:
            word = "warning: " if abs(diff) > WARN else ""
            out.append(f"{word}parameters: {counted:,} in the safetensors headers (planned), "
                       f"{formula.num_parameters:,} from the architecture ({diff:+.1%}; a "
                       "multimodal checkpoint's towers and a draft's MTP layers are in the "
                       "headers only)")
    return tuple(out)


def _rounding(figure: str) -> float:
    """Half a unit of the figure's last digit: '1B' may be 1.24e9, '0.6B' 0.596e9."""
    decimals = len(figure.partition(".")[2])
    return 0.5 * 10 ** -decimals * 1e9


def _against_name(spec, total: int, name: str) -> tuple[str, ...]:
    """'Nemotron-3-Super-120B-A12B' states 120e9 total and 12e9 active: a count near neither
    (within 10 %, or the figure's own rounding) is a count that ran away."""
    stated = [(float(m.group(1)) * 1e9, _rounding(m.group(1))) for m in STATED.finditer(name)]
    if not stated:
        return ()
    active = active_parameters(spec)
    if any(abs(_off(n, s)) <= max(WARN, r / s) for s, r in stated for n in (total, active)):
        return ()
    shown = " / ".join(f"{s / 1e9:g}B" for s, _ in stated)
    return (f"warning: {total:,} parameters ({active:,} active) are more than 10 % from the "
            f"{shown} its name states: check the architecture fields (experts, their width, "
            "layer pattern)",)
