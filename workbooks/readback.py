"""Read a workbook's Inputs back into plan flags, so `plan --from-workbook` plans it again."""

import math
import re
import zipfile
from dataclasses import asdict, dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path

from openpyxl import load_workbook
from openpyxl.utils.exceptions import InvalidFileException

from servecap.ledger.devices import resolve_device
from servecap.ledger.errors import SpecError
from servecap.ledger.serve import DEFAULT_SAFETY_FRACTION
from servecap.ledger.units import parse_fraction_or_size

from .deploy_inputs import FRACTIONS, MEASURED, default_fraction, engine_base
from .encoder_rows import replayed
from .inputs_sheet import HYBRID_NAMES, model_rows
from .names import cell_of
from .release_inputs import RELEASE_NAMES
from .scenario_sheet import read_scenario
from .source import WorkbookSource

FIELD = "--from-workbook"
_DIGITS = re.compile(r"\d{1,3}(,\d{3}){0,5}|\d{1,18}")  # a pasted count, not 5,000 digits
MAX_UNZIPPED_BYTES = 64 * 2**20  # a capacity workbook unzips to well under 1 MiB


@dataclass(frozen=True)
class WorkbookPlan:
    """flags: the `servecap plan` flag values (PlanFlags fields) that reproduce the workbook."""

    model_ref: str
    flags: dict
    runtime_peak_bytes: int
    runtime_peak_rule: str
    model_cells: dict
    deploy: dict


def read_plan_inputs(path: Path) -> WorkbookPlan:
    return plan_inputs(_Cells(path))


def read_workbook(path: Path, field: str = FIELD) -> tuple[WorkbookPlan | None,
                                                          tuple[dict, dict] | None]:
    """The Inputs as they are now (None: a workbook without them, such as search's), and the
    recorded scenario with the Inputs as written (None: a workbook without a Scenario sheet);
    the file is read once. field: the flag the file was given with, which a file that is no
    readable workbook is named by (--from-workbook, or --scenario)."""
    cells = _Cells(path, field)
    recorded = read_scenario(cells.wb, cells.path)
    if recorded is not None and recorded[1] == {}:
        return None, recorded  # written without Inputs (search's): its scenario alone
    return plan_inputs(cells), recorded


def inputs_snapshot(wb) -> dict:
    """What plan_inputs reads from a workbook just built: the Scenario sheet keeps it, so an
    Inputs cell edited later is told from one as written."""
    return asdict(plan_inputs(_Cells.of(wb, "(workbook being written)")))


def plan_inputs(cells: "_Cells") -> WorkbookPlan:
    device = cells.whole("device_bytes", 1)
    context, requests, lengths = _load(cells)
    flags = {
        "device": _device_text(cells.text("device_label"), device),
        "context": context, "concurrency": requests, "lengths": lengths,
        "runtime_peak": None if cells.text("runtime_peak_rule") == "estimate"
        else str(cells.whole("runtime_peak_bytes")),
        "safety": _safety_text(cells, device),
        "weight_dtype": cells.text("weight_dtype_flag") or None,
        "kv_dtype": cells.text("kv_dtype"), "activation_dtype": cells.text("activation_dtype"),
        "block_size": cells.whole("block_size_tokens", 1),
        "shared_prefix": cells.whole("shared_prefix_tokens"),
        "group_size": cells.whole("group_size"),
        "max_num_batched_tokens": cells.whole("max_num_batched_tokens"),
        "max_num_seqs": cells.whole("max_num_seqs"),
    }
    flags.update(_lora(cells))
    flags.update(_multimodal(cells))
    model_cells = {name: cells.value(name) for name in MODEL_NAMES}
    model_cells.update({name: cells.value(name) for name in HYBRID_NAMES + RELEASE_NAMES
                        if cells.wb.defined_names.get(name) is not None})
    deploy = _deploy(cells)
    if deploy.get("engine", "plain") != "plain":
        flags["safety"] = None  # an engine keeps its own headroom; --safety is plain's
    return WorkbookPlan(cells.text("model"), flags, cells.whole("runtime_peak_bytes"),
                        cells.text("runtime_peak_rule"), model_cells, deploy)


def _lora(cells: "_Cells") -> dict:
    """vLLM's LoRA knobs (PlanFlags fields), where the workbook planned the slots."""
    if cells.wb.defined_names.get("max_loras") is None:
        return {}
    return {"enable_lora": True, "max_loras": cells.whole("max_loras", 1),
            "max_lora_rank": cells.whole("max_lora_rank", 1),
            "max_cpu_loras": cells.whole("max_cpu_loras", 1)
            if cells.value("max_cpu_loras") not in (None, "") else None,
            "lora_target_modules": cells.text("lora_target_modules") or None,
            "fully_sharded_loras": bool(cells.value("fully_sharded_loras")),
            "lora_dtype": {"bf16": "bfloat16", "fp16": "float16"}.get(
                cells.text("lora_dtype"), cells.text("lora_dtype") or None)}


def _multimodal(cells: "_Cells") -> dict:
    """vLLM's multimodal flags (PlanFlags fields), where the workbook planned the encoder; the
    profiled modality's count is the encoder_limit_per_prompt cell."""
    if cells.wb.defined_names.get("encoder_modality") is None:
        return {}
    return {"limit_mm_per_prompt": replayed(cells.text("limit_mm_per_prompt"),
                                            cells.text("encoder_modality"),
                                            cells.whole("encoder_limit_per_prompt")),
            "mm_processor_kwargs": cells.text("mm_processor_kwargs") or None,
            "mm_encoder_tp_mode": cells.text("mm_encoder_tp_mode") or None}


def _deploy(cells: "_Cells") -> dict:
    """The deployment flags (DeployFlags fields); a workbook without the section is one device
    with the plain engine. A knob equal to the engine's default is left to the default."""
    if cells.wb.defined_names.get("engine") is None:
        return {}
    out = {key: cells.whole(key, 1) for key in ("tensor_parallel_size",
                                                 "pipeline_parallel_size", "data_parallel_size")}
    out["engine"] = cells.text("engine")
    knob = FRACTIONS.get(engine_base(out["engine"]))
    if knob and cells.wb.defined_names.get(knob) is not None:
        value = cells.value(knob)
        default = default_fraction(out["engine"], out["tensor_parallel_size"],
                                   out["pipeline_parallel_size"])
        if value is not None and value != default:
            out[knob] = value
    if cells.wb.defined_names.get("kv_cache_memory_bytes") is not None \
            and cells.value("kv_cache_memory_bytes") not in (None, ""):
        out["kv_cache_memory"] = str(cells.whole("kv_cache_memory_bytes"))
    for name, field in MEASURED:
        out[field] = cells.text(name) or None
    if cells.wb.defined_names.get("kv_offloading_size_gib") is not None:
        out.update(kv_offloading_size=float(cells.value("kv_offloading_size_gib")),
                   kv_offloading_backend=cells.text("kv_offloading_backend"))
    if cells.wb.defined_names.get("enable_eplb") is not None:
        out.update(enable_expert_parallel=True, enable_eplb=True,
                   num_redundant_experts=cells.whole("num_redundant_experts"),
                   eplb_window_size=cells.whole("eplb_window_size", 1))
    return out


def check_model_cells(plan_inputs: WorkbookPlan, src: WorkbookSource, path: Path) -> None:
    """Model-derived cells are checked, not applied: a changed layer count must come from the
    model file, where every other line (weights, runtime) follows it too."""
    refuse_changed_model_cells(plan_inputs, {row.name: row.value for row in model_rows(src)},
                               path)


def refuse_changed_model_cells(plan_inputs: WorkbookPlan, expected: dict, path: Path) -> None:
    """Each model cell must still hold the value the model gives it (`expected`)."""
    for name, value in expected.items():
        found = plan_inputs.model_cells.get(name, MISSING)
        if found == value or (name in RELEASE_NAMES and found == MISSING):
            continue  # a release rule a workbook of an older servecap does not name
        if name == "mamba_cache_mode":
            raise SpecError("Inputs!mamba_cache_mode", found, f"{value!r}: no plan flag sets "
                            "another mode (the workbook recalculates any); set it back to "
                            "replan", str(path))
        if name in RELEASE_NAMES:
            raise SpecError(f"Inputs!{name}", found, f"{value!r}: the engine's release and "
                            "the GPU set it (--engine vllm==X, --device); set it back to "
                            "replan", str(path))
        raise SpecError(f"Inputs!{name}", found, f"comes from the model ({value!r} "
                        f"for {plan_inputs.model_ref}); change the model file, not the "
                        "workbook", str(path))


def edited_inputs(now: WorkbookPlan, written: dict, path: Path) -> dict[str, object]:
    """The plan flags (PlanFlags and DeployFlags fields, and `model`) whose Inputs cells differ
    from the workbook as written, with their values now; a changed model cell is refused. An
    edited runtime peak is declared, as plan --from-workbook takes one."""
    refuse_changed_model_cells(now, written.get("model_cells", {}), path)
    edits = {key: value for key, value in now.flags.items()
             if written["flags"].get(key, MISSING) != value}
    if now.runtime_peak_bytes != written.get("runtime_peak_bytes"):
        edits["runtime_peak"] = str(now.runtime_peak_bytes)
    for key in set(now.deploy) | set(written["deploy"]):  # a knob back at its default: absent
        if now.deploy.get(key) != written["deploy"].get(key):
            edits[key] = now.deploy.get(key)
    if now.model_ref != written.get("model_ref"):
        edits["model"] = now.model_ref
    return edits


# The Inputs cell behind each plan flag: -v names the cell an edit was read from.
CELL_OF_FLAG = {"device": "device_bytes", "context": "context_tokens", "concurrency": "requests",
                "lengths": "load_lengths_tokens", "runtime_peak": "runtime_peak_bytes",
                "safety": "safety_bytes", "weight_dtype": "weight_dtype_flag",
                "block_size": "block_size_tokens", "shared_prefix": "shared_prefix_tokens",
                "kv_cache_memory": "kv_cache_memory_bytes",
                **{field: name for name, field in MEASURED}}


def _check_unzipped_size(path: Path, field: str = FIELD) -> None:
    """A zip bomb (1 MB holding a 1 GiB part) is refused from the sizes its directory states,
    before anything is inflated; zipfile stops a part that inflates past its stated size."""
    if not Path(path).exists():
        raise SpecError(field, str(path), "no such file")
    if not Path(path).is_file():
        raise SpecError(field, str(path), "not a readable .xlsx workbook (a pipe, device or "
                        "folder: give a regular file)")
    with zipfile.ZipFile(path) as archive:
        total = sum(info.file_size for info in archive.infolist())
    if total > MAX_UNZIPPED_BYTES:
        raise SpecError(field, str(path), f"unzips to {total:,} bytes; a capacity workbook is "
                        f"far smaller (cap {MAX_UNZIPPED_BYTES:,})")


class _Cells:
    """Named cells of one workbook, with errors that name the file and the cell."""

    @classmethod
    def of(cls, wb, where: str) -> "_Cells":
        cells = cls.__new__(cls)
        cells.wb, cells.path, cells.field = wb, where, FIELD
        return cells

    def __init__(self, path: Path, field: str = FIELD) -> None:
        self.path, self.field = str(path), field
        try:
            _check_unzipped_size(path, field)
            self.wb = load_workbook(path)
        except SpecError:
            raise
        except (OSError, zipfile.BadZipFile, KeyError, ValueError, InvalidFileException,
                SyntaxError) as exc:  # xml ParseError is a SyntaxError
            raise SpecError(self.field, self.path, f"not a readable .xlsx workbook "
                            f"({exc.__class__.__name__})") from None

    def value(self, name: str):
        cell = cell_of(self.wb, name)
        if cell is None:
            raise SpecError(self.field, self.path, f"no defined name {name!r} pointing at a cell "
                            "of an existing sheet: not an intact servecap capacity workbook")
        return cell.value

    def text(self, name: str) -> str:
        value = self.value(name)
        return "" if value is None else str(value).strip()

    def whole(self, name: str, minimum: int = 0) -> int:
        value = self.value(name)
        if isinstance(value, str) and _DIGITS.fullmatch(value.strip()):
            value = int(value.strip().replace(",", ""))  # a number pasted as text
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not math.isfinite(value) or value != int(value) or value < minimum:
            raise SpecError(f"Inputs!{name}", value, f"a whole number >= {minimum}", self.path)
        return int(value)

    def truth(self, name: str) -> bool:
        """TRUE as openpyxl writes it, or as a spreadsheet saves it back (=TRUE(), 1)."""
        value = self.value(name)
        text = str(value).strip().upper().removeprefix("=").removesuffix("()")
        if text in ("TRUE", "1", "FALSE", "0"):
            return text in ("TRUE", "1")
        raise SpecError(f"Inputs!{name}", value, "TRUE or FALSE", self.path)

    def column(self, name: str) -> list:
        defined = self.wb.defined_names.get(name)
        sheet, ref = next(iter(defined.destinations), (None, None)) if defined else (None, None)
        if sheet not in self.wb.sheetnames:
            raise SpecError(self.field, self.path, f"no defined name {name!r} pointing at a "
                            "range of an existing sheet: not an intact servecap capacity "
                            "workbook")
        cells = self.wb[sheet][ref.replace("$", "")]
        return [row[0].value for row in (cells if isinstance(cells, tuple) else ((cells,),))]


MISSING = "(no such defined name)"
MODEL_NAMES = ("num_parameters", "quantized_parameters", "quantized_bits_per_parameter",
               "dense_bits_per_parameter", "weight_metadata_bytes", "declared_weights_bytes",
               "num_layers", "num_sliding_layers", "sliding_window_tokens", "attention_kind",
               "num_kv_heads", "head_dim", "kv_lora_rank", "qk_rope_head_dim")


def _load(cells: _Cells) -> tuple[int | None, int | None, str | None]:
    """(context, concurrency, lengths): the live-length table when it is the load."""
    if not cells.truth("explicit_lengths"):
        return cells.whole("context_tokens", 1), cells.whole("requests", 1), None
    lengths = cells.column("load_lengths_tokens")
    counts = cells.column("load_requests")
    expanded = []
    for length, count in zip(lengths, counts, strict=True):
        if not isinstance(length, int) or not isinstance(count, int) or count < 0:
            raise SpecError("Inputs!load_lengths_tokens", (length, count),
                            "whole numbers of tokens and requests", cells.path)
        expanded += [length] * count
    return None, None, ",".join(map(str, expanded))


def _device_text(label: str, device_bytes: int) -> str:
    """The label as typed when it still means these bytes, else the bytes themselves."""
    try:
        if label and resolve_device(label)[0] == device_bytes:
            return label
    except SpecError:
        pass
    return str(device_bytes)


def _safety_text(cells: _Cells, device_bytes: int) -> str | None:
    """Keep the original rule (default 10%, a declared share) while the cell still equals it."""
    safety, rule = cells.whole("safety_bytes"), cells.text("safety_rule")
    if rule == "default" and safety == int(device_bytes * DEFAULT_SAFETY_FRACTION):
        return None
    if rule == "fraction":
        try:
            text = f"{Decimal(str(cells.value('safety_fraction'))) * 100}%"
        except InvalidOperation:
            raise SpecError("Inputs!safety_fraction", cells.value("safety_fraction"),
                            "a share of the device such as 0.1", cells.path) from None
        if parse_fraction_or_size(text, device_bytes, "--safety")[0] == safety:
            return text
    return str(safety)
