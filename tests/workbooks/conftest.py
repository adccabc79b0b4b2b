"""Workbooks recalculated by a real LibreOffice, built once per session (one soffice run)."""

import json
import os
import random
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from openpyxl import load_workbook

from servecap.cli.inputs import PlanFlags
from servecap.cli.workbook_cmd import workbook_source
from servecap.ledger.plan import Plan, build_plan
from servecap.ledger.units import GiB
from servecap.model_configs import bundled_models, load_model
from servecap.workbooks.envelope import Sweep
from servecap.workbooks.export import build_workbook, save_workbook
from servecap.workbooks.names import cell_of
from servecap.workbooks.source import WorkbookSource

# every bundled model the workbook models (it refuses hybrids: tests/cli/test_config_relevance)
BUNDLED = [p.stem for p in bundled_models() if not load_model(p.stem).spec.is_hybrid]


def soffice() -> str:
    """LibreOffice is required under CI=true (a missing one fails); locally it may be absent."""
    found = shutil.which("soffice") or shutil.which("libreoffice")
    if found:
        return found
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail("LibreOffice (soffice) is required under CI=true to recalculate workbooks")
    pytest.skip("LibreOffice (soffice) is not installed")


@pytest.fixture(scope="session")
def soffice_bin() -> str:
    return soffice()


def recalc(binary: str, paths: list[Path], outdir: Path, workers: int = 2) -> dict[str, Path]:
    """Open each file in LibreOffice headless and save it again: formulas without cached
    values are computed on load. A few processes share the batch, each with its own profile
    (two instances on one profile would lock each other out)."""
    outdir.mkdir(parents=True, exist_ok=True)
    profiles = [Path(tempfile.mkdtemp(prefix="servecap-lo-profile-")) for _ in range(workers)]
    try:
        runs = [subprocess.Popen([binary, f"-env:UserInstallation={profile.as_uri()}",
                                  "--headless", "--norestore", "--convert-to", "xlsx",
                                  "--outdir", str(outdir), *map(str, paths[i::workers])],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                for i, profile in enumerate(profiles)]
        outputs = [run.communicate(timeout=300)[0] for run in runs]
        assert all(run.returncode == 0 for run in runs), outputs
    finally:
        for profile in profiles:
            shutil.rmtree(profile, ignore_errors=True)
    out = {p.stem: outdir / p.name for p in paths}
    missing = [str(p) for p in out.values() if not p.exists()]
    assert not missing, f"LibreOffice did not write {missing}"
    return out


@dataclass(frozen=True)
class Case:
    src: WorkbookSource
    expected: Plan
    original: Path
    computed: Path
    sweep: Sweep | None = None


def device_for(model: str) -> str:
    """A device with room for several requests, so every ceiling is a real number."""
    probe = workbook_source(model, PlanFlags(device="64TiB", context=4096, concurrency=4))
    plan = probe.plan()
    fixed = plan.line("weights") + plan.line("weight_metadata") + plan.line("runtime_peak")
    return f"{-(-(fixed * 2) // GiB) + 16}GiB"


def _flag_cases() -> dict[str, tuple[str, PlanFlags]]:
    cases = {m: (m, PlanFlags(device=device_for(m), context=4096, concurrency=4))
             for m in BUNDLED}
    cases.update({
        "llama-int4-fp8kv": ("llama-3.1-8b", PlanFlags(
            device="24GiB", context=8000, concurrency=3, weight_dtype="int4", kv_dtype="fp8",
            block_size=32, safety="7.5%")),
        "llama-lengths-prefix": ("llama-3.1-8b", PlanFlags(
            device="40GiB", lengths="17,33,65,65", shared_prefix=16, runtime_peak="3GiB")),
        "gptoss-lengths-window": ("gpt-oss-20b", PlanFlags(
            device="40GiB", lengths="100,300,5000,5000,129", shared_prefix=200,
            kv_dtype="int8")),
        "deepseek-fp8kv": ("deepseek-v3", PlanFlags(
            device="2TiB", context=16384, concurrency=8, kv_dtype="fp8", block_size=64)),
        "gemma-mixed": ("gemma-2-9b-it", PlanFlags(
            device="h100-80gb", context=10000, concurrency=5, safety="2GiB", block_size=8)),
    })
    return cases


def _edits() -> dict[str, tuple[str, dict, dict]]:
    """Inputs edited in the file: (flag case, {defined name: new value}, ServeSpec changes)."""
    return {
        "edit-llama-context": ("llama-3.1-8b", {"context_tokens": 10000, "requests": 7},
                               {"context_tokens": 10000, "concurrency": 7}),
        "edit-gemma-context": ("gemma-mixed", {"context_tokens": 50001},
                               {"context_tokens": 50001}),
        "edit-teaching-device": ("teaching-7b", {"device_bytes": 80 * GiB, "kv_dtype": "fp8",
                                                 "block_size_tokens": 128},
                                 {"device_bytes": 80 * GiB, "kv_dtype": "fp8",
                                  "block_size_tokens": 128}),
    }


RANDOM_BASES = ("llama-3.1-8b", "gemma-mixed", "deepseek-fp8kv", "mistral-7b-v0.1",
                "phi-3-mini-4k-instruct", "qwen3-30b-a3b", "llama-int4-fp8kv", "model-dir")
RANDOM_EDITS = tuple(f"random-{i}" for i in range(12))


def _random_edits(plans: dict[str, Plan]) -> dict[str, tuple[str, dict, dict]]:
    """Seeded random what-ifs: context, requests, block size, KV dtype and device together.
    The safety cell is an input, so it keeps its bytes when the device changes."""
    rng = random.Random(2026)
    edits = {}
    for name in RANDOM_EDITS:
        base = rng.choice(RANDOM_BASES)
        cells = {"context_tokens": rng.randint(1, 200_000), "requests": rng.randint(1, 64),
                 "block_size_tokens": rng.choice((1, 8, 16, 32, 128)),
                 "kv_dtype": rng.choice(("fp32", "bf16", "fp8", "int4")),
                 "device_bytes": rng.randint(20, 4096) * GiB + rng.randint(0, GiB)}
        changes = {"context_tokens": cells["context_tokens"],
                   "concurrency": cells["requests"],
                   "block_size_tokens": cells["block_size_tokens"],
                   "kv_dtype": cells["kv_dtype"], "device_bytes": cells["device_bytes"],
                   "safety_bytes": plans[base].line("safety"), "safety_fraction": None}
        edits[name] = (base, cells, changes)
    return edits


def model_directory(folder: Path) -> Path:
    """A local model folder: a config.json and a header-only safetensors shard whose tensor
    sizes (values and a scale) the ledger reads as the exact weight bytes."""
    directory = folder / "tiny-llama"
    directory.mkdir(exist_ok=True)
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
              "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16,
              "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64,
              "vocab_size": 128256, "max_position_embeddings": 131072,
              "torch_dtype": "bfloat16", "tie_word_embeddings": True}
    (directory / "config.json").write_text(json.dumps(config))
    header = json.dumps({
        "model.embed_tokens.weight": {"dtype": "BF16", "shape": [128256, 2048],
                                      "data_offsets": [0, 2_471_000_003]},
        "model.layers.0.mlp.down_proj.weight_scale": {"dtype": "F32", "shape": [2048],
                                                      "data_offsets": [2_471_000_003,
                                                                       2_471_008_195]},
    }).encode()
    (directory / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header)
    return directory


def _envelope_sweep() -> tuple[str, PlanFlags, Sweep]:
    return ("gemma-2-9b-it", PlanFlags(device="40GiB", context=4096, concurrency=2),
            Sweep((("40GiB", 40 * GiB), ("H100", 85_017_853_952)), (1024, 4096, 32768, 131072),
                  ("bf16", "fp8", "int4")))


@pytest.fixture(scope="session")
def recalculated(soffice_bin, tmp_path_factory) -> dict[str, Case]:
    folder = tmp_path_factory.mktemp("books")
    cases: dict[str, tuple] = {}
    flag_cases = _flag_cases()
    flag_cases["model-dir"] = (str(model_directory(folder)),
                               PlanFlags(device="24GiB", context=3000, concurrency=3))
    for name, (model, flags) in flag_cases.items():
        src = workbook_source(model, flags)
        cases[name] = (src, src.plan(), None)
    model, flags, sweep = _envelope_sweep()
    src = workbook_source(model, flags)
    cases["envelope"] = (src, src.plan(), sweep)
    paths = {}
    for name, (src, _, sw) in cases.items():
        paths[name] = save_workbook(build_workbook(src, sw), folder / f"{name}.xlsx")
    plans = {name: case[1] for name, case in cases.items()}
    for name, (base, cells, changes) in {**_edits(), **_random_edits(plans)}.items():
        src = cases[base][0]
        paths[name] = _edited(paths[base], cells, folder / f"{name}.xlsx")
        expected = build_plan(src.spec, replace(src.serve, **changes), src.overrides)
        cases[name] = (src, expected, None)
    computed = recalc(soffice_bin, list(paths.values()), folder / "recalculated")
    return {name: Case(src, plan, paths[name], computed[name], sw)
            for name, (src, plan, sw) in cases.items()}


def _edited(path: Path, cells: dict, target: Path) -> Path:
    wb = load_workbook(path)
    for name, value in cells.items():
        cell_of(wb, name).value = value
    wb.save(target)
    return target


def cached_mismatches(original: Path, computed: Path) -> tuple[int, list]:
    """(formula cells with a cached value, those whose cached value differs from what
    LibreOffice computes; floats to the 15 significant digits xlsx stores)."""
    formulas = load_workbook(original)
    cached = load_workbook(original, data_only=True)
    recalculated = load_workbook(computed, data_only=True)
    count, wrong = 0, []
    for ws in formulas.worksheets:
        for row in ws.iter_rows():
            for cell in row:
                if not (isinstance(cell.value, str) and cell.value.startswith("=")):
                    continue
                value = cached[ws.title][cell.coordinate].value
                if value is None:
                    continue
                count += 1
                fresh = recalculated[ws.title][cell.coordinate].value
                same = value == fresh or (isinstance(value, float) and isinstance(fresh, float)
                                          and abs(value - fresh) <= 1e-14 * abs(fresh))
                if not same:
                    wrong.append((ws.title, cell.coordinate, value, fresh))
    return count, wrong
