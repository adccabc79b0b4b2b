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

from servecap.cli.deploy import DeployFlags
from servecap.cli.inputs import PlanFlags
from servecap.cli.workbook_cmd import workbook_source
from servecap.ledger.eplb import EplbSpec
from servecap.ledger.lora import LoraSpec
from servecap.ledger.plan import Plan, build_plan
from servecap.ledger.ranks import build_deployment
from servecap.ledger.units import GiB
from servecap.model_configs import bundled_models
from servecap.workbooks.envelope import Sweep
from servecap.workbooks.export import build_workbook, save_workbook
from servecap.workbooks.names import cell_of
from servecap.workbooks.source import WorkbookSource

BUNDLED = [p.stem for p in bundled_models()]
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
# the bundled models of today's new families: hybrids (states, chunked-local layers, an
# indexer, per-layer shapes), and the two whose configs were refused before (kimi_k2, MiniMax)
HYBRIDS = ("qwen3.6-35b-a3b", "nemotron-3-nano-30b-a3b", "llama-4-scout-17b-16e-instruct",
           "deepseek-v3.2", "gemma-4-26b-a4b", "minimax-m2.5", "kimi-k2-instruct")
# transformers' own config-class defaults, written at test time (no official config.json of
# either was found: tests/model_configs/test_mamba2_families.py)
CLASS_DEFAULTS = {"falcon-h1": ("falcon_h1", {"num_hidden_layers": 10}),
                  "granite-4": ("granitemoehybrid", {"num_hidden_layers": 10, "layer_types":
                                                     ["mamba"] * 4 + ["attention"]
                                                     + ["mamba"] * 5})}


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


@pytest.fixture(scope="session")
def engine_books(soffice_bin, tmp_path_factory) -> dict[str, tuple[int, dict, Path, Path]]:
    """The Ranks sheet's engine cases (ranks_books.py), written and recalculated once."""
    from ranks_books import build_books  # it reads this module's recalc and BUNDLED

    return build_books(soffice_bin, tmp_path_factory.mktemp("ranks"))


def recalc(binary: str, paths: list[Path], outdir: Path, workers: int = 2) -> dict[str, Path]:
    """Open each file in LibreOffice headless and save it again: formulas without cached
    values are computed on load. A few processes share the batch, each with its own profile
    (two instances on one profile would lock each other out)."""
    outdir.mkdir(parents=True, exist_ok=True)
    workers = max(1, min(workers, len(paths)))  # soffice given no file waits for ever
    profiles = [Path(tempfile.mkdtemp(prefix="servecap-lo-profile-")) for _ in range(workers)]
    runs = []
    try:
        runs += [subprocess.Popen([binary, f"-env:UserInstallation={profile.as_uri()}",
                                  "--headless", "--norestore", "--convert-to", "xlsx",
                                  "--outdir", str(outdir), *map(str, paths[i::workers])],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                for i, profile in enumerate(profiles)]
        outputs = [run.communicate(timeout=600)[0] for run in runs]
        assert all(run.returncode == 0 for run in runs), outputs
    finally:
        for run in runs:  # none left behind by a timeout or a failed assertion
            if run.poll() is None:
                run.kill()
                run.wait()
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
    replanned: Plan | None = None  # the deployment's binding rank (--from-workbook), if not it


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
            device="40GiB", lengths="100,300,5000,5000,129", shared_prefix=100,
            kv_dtype="int8")),
        "deepseek-fp8kv": ("deepseek-v3", PlanFlags(
            device="2TiB", context=16384, concurrency=8, kv_dtype="fp8", block_size=64)),
        "gemma-mixed": ("gemma-2-9b-it", PlanFlags(
            device="h100-80gb", context=10000, concurrency=5, safety="2GiB", block_size=8)),
        "qwen36-lengths-prefix": ("qwen3.6-35b-a3b", PlanFlags(
            device="160GiB", lengths="100,5000,5000,70000", shared_prefix=64, kv_dtype="fp8")),
        "nemotron-int8kv": ("nemotron-3-nano-30b-a3b", PlanFlags(
            device="96GiB", context=100000, concurrency=3, kv_dtype="int8", safety="5%")),
        "llama4-past-chunk": ("llama-4-scout-17b-16e-instruct", PlanFlags(
            device="512GiB", context=20000, concurrency=5, kv_dtype="fp8", block_size=32)),
        "llama4-lengths": ("llama-4-scout-17b-16e-instruct", PlanFlags(
            device="512GiB", lengths="100,8191,8192,8193,30000", shared_prefix=100)),
        "deepseek32-lengths": ("deepseek-v3.2", PlanFlags(
            device="2TiB", lengths="17,5000,16385", kv_dtype="fp8", block_size=64)),
        "gemma4-mixed": ("gemma-4-26b-a4b", PlanFlags(
            device="h100-80gb", lengths="100,2000,40000", shared_prefix=48, block_size=8)),
        # modelopt checkpoints: FP4 MLPs beside bf16 attention; FP8 beside W4A16 NVFP4
        "gemma4-31b-nvfp4": (str(FIXTURES / "nvidia--Gemma-4-31B-IT-NVFP4"), PlanFlags(
            device="b200-180gb", context=8192, concurrency=4)),
        "qwen36-27b-mixed-formats": (str(FIXTURES / "nvidia--Qwen3.6-27B-NVFP4"), PlanFlags(
            device="h200-141gb", context=8192, concurrency=4)),
        "llama-lora": ("llama-3.1-8b", PlanFlags(
            device="h100-80gb", context=8192, concurrency=8, enable_lora=True, max_loras=4,
            max_lora_rank=64)),
        "phi3-lora-targets": ("phi-3-mini-4k-instruct", PlanFlags(
            device="24GiB", context=4096, concurrency=4, enable_lora=True, max_loras=2,
            max_lora_rank=32, lora_target_modules="qkv_proj,lm_head")),
        "qwen3moe-eplb": ("qwen3-30b-a3b", PlanFlags(device="h200-141gb", context=8192,
                                                      concurrency=8),
                          # dp 2: one device's ledger (no Ranks sheet), ep = tp x dp = 2
                          DeployFlags(data_parallel_size=2, enable_expert_parallel=True,
                                      enable_eplb=True, num_redundant_experts=16)),
        # a host KV tier: vLLM's native one (v0.33 rules) and LMCache's (v0.19 rules)
        "llama-offload-native": ("llama-3.1-8b", PlanFlags(device="h100-80gb", context=8192,
                                                          concurrency=4),
                                 DeployFlags(engine="vllm", kv_offloading_size=64)),
        "llama-offload-lmcache": ("llama-3.1-8b", PlanFlags(device="h100-80gb", context=8192,
                                                           concurrency=4),
                                  DeployFlags(engine="vllm==0.19", kv_offloading_size=50,
                                              kv_offloading_backend="lmcache")),
        # a hybrid: gpt-oss's sliding and full groups share one page, so a host block is
        # that page, not KV per token x block_size
        "gptoss-offload-native": ("gpt-oss-20b", PlanFlags(device="h100-80gb", context=8192,
                                                           concurrency=4),
                                  DeployFlags(engine="vllm", kv_offloading_size=64)),
    })
    return cases


def _edits() -> dict[str, tuple[str, dict, dict]]:
    """Inputs edited in the file: (flag case, {defined name: new value}, ServeSpec changes)."""
    return {
        "edit-llama-context": ("llama-3.1-8b", {"context_tokens": 10000, "requests": 7},
                               {"context_tokens": 10000, "concurrency": 7}),
        "edit-gemma-context": ("gemma-mixed", {"context_tokens": 50001},
                               {"context_tokens": 50001}),
        "edit-llama-lora": ("llama-lora", {"max_loras": 16, "max_lora_rank": 128},
                            {"lora": LoraSpec(max_loras=16, max_lora_rank=128)}),
        "edit-qwen3moe-eplb": ("qwen3moe-eplb", {"num_redundant_experts": 64,
                                                 "eplb_window_size": 4000},
                               {"eplb": EplbSpec(64, 2, 4000)}),
        "edit-teaching-device": ("teaching-7b", {"device_bytes": 80 * GiB, "kv_dtype": "fp8",
                                                 "block_size_tokens": 128},
                                 {"device_bytes": 80 * GiB, "kv_dtype": "fp8",
                                  "block_size_tokens": 128}),
    }


def _hybrid_edits(plans: dict[str, Plan]) -> dict[str, tuple[str, dict, dict]]:
    """What a reviewer changes on a hybrid: the load, the device, the KV dtype, the block."""
    kept = {name: {"safety_bytes": plans[name].line("safety"), "safety_fraction": None}
            for name in ("nemotron-3-nano-30b-a3b", "deepseek-v3.2")}
    return {
        "edit-qwen36-load": ("qwen3.6-35b-a3b", {"context_tokens": 100000, "requests": 3,
                                                  "kv_dtype": "fp8"},
                             {"context_tokens": 100000, "concurrency": 3, "kv_dtype": "fp8"}),
        "edit-nemotron-device": ("nemotron-3-nano-30b-a3b",
                                 {"device_bytes": 200 * GiB, "block_size_tokens": 32},
                                 {"device_bytes": 200 * GiB, "block_size_tokens": 32,
                                  **kept["nemotron-3-nano-30b-a3b"]}),
        "edit-llama4-context": ("llama-4-scout-17b-16e-instruct", {"context_tokens": 50000},
                                {"context_tokens": 50000}),
        "edit-deepseek32-dtype": ("deepseek-v3.2", {"kv_dtype": "int4", "context_tokens": 30000,
                                                    "device_bytes": 3 * 2**40},
                                  {"kv_dtype": "int4", "context_tokens": 30000,
                                   "device_bytes": 3 * 2**40, **kept["deepseek-v3.2"]}),
        # a token budget below the context: the windowed layers' prefill peak is W - 1 + T;
        # the runtime peak is a value the formulas carry, so it stays as the cell holds it
        # (plan --from-workbook takes a cell that is no longer its estimate as declared)
        "edit-gemma4-block": ("gemma-4-26b-a4b", {"block_size_tokens": 1, "requests": 20,
                                                  "max_num_batched_tokens": 512},
                              {"block_size_tokens": 1, "concurrency": 20,
                               "max_num_batched_tokens": 512,
                               "runtime_peak_bytes": plans["gemma-4-26b-a4b"].line(
                                   "runtime_peak")}),
    }


RANDOM_BASES = ("llama-3.1-8b", "gemma-mixed", "deepseek-fp8kv", "mistral-7b-v0.1",
                "phi-3-mini-4k-instruct", "qwen3-30b-a3b", "llama-int4-fp8kv", "model-dir")
RANDOM_EDITS = tuple(f"random-{i}" for i in range(12))
HYBRID_BASES = ("qwen3.6-35b-a3b", "nemotron-3-nano-30b-a3b", "llama-4-scout-17b-16e-instruct",
                "deepseek-v3.2", "gemma-4-26b-a4b", "nemotron-int8kv", "llama4-past-chunk")
HYBRID_RANDOM_EDITS = tuple(f"random-hybrid-{i}" for i in range(8))


def _random_edits(plans: dict[str, Plan], names: tuple[str, ...] = RANDOM_EDITS,
                  bases: tuple[str, ...] = RANDOM_BASES,
                  seed: int = 2026) -> dict[str, tuple[str, dict, dict]]:
    """Seeded random what-ifs: context, requests, block size, KV dtype and device together.
    The safety cell is an input, so it keeps its bytes when the device changes."""
    rng = random.Random(seed)
    edits = {}
    for name in names:
        base = rng.choice(bases)
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


def _envelope_sweeps() -> dict[str, tuple[str, PlanFlags, Sweep]]:
    return {
        "envelope": ("gemma-2-9b-it", PlanFlags(device="40GiB", context=4096, concurrency=2),
                     Sweep((("40GiB", 40 * GiB), ("H100", 85_017_853_952)),
                           (1024, 4096, 32768, 131072), ("bf16", "fp8", "int4"))),
        "envelope-hybrid": ("qwen3.6-35b-a3b", PlanFlags(device="96GiB", context=4096,
                                                          concurrency=2),
                            Sweep((("96GiB", 96 * GiB), ("H200", 150_754_820_096)),
                                  (1024, 8192, 131072, 262144), ("bf16", "fp8"))),
    }


def class_default_configs(folder: Path) -> dict[str, Path]:
    """Falcon-H1 and Granite-4 as transformers' config classes default them, as config.json;
    none without transformers (a dev dependency)."""
    try:
        import transformers
    except ImportError:
        return {}
    transformers.logging.set_verbosity_error()
    out = {}
    for name, (model_type, fields) in CLASS_DEFAULTS.items():
        data = transformers.AutoConfig.for_model(model_type, **fields).to_dict()
        directory = folder / name
        directory.mkdir(exist_ok=True)
        (directory / "config.json").write_text(json.dumps({**data, "torch_dtype": "bfloat16"}))
        out[name] = directory / "config.json"
    return out


@pytest.fixture(scope="session")
def recalculated(soffice_bin, tmp_path_factory) -> dict[str, Case]:
    folder = tmp_path_factory.mktemp("books")
    cases: dict[str, tuple] = {}
    flag_cases = _flag_cases()
    flag_cases["model-dir"] = (str(model_directory(folder)),
                               PlanFlags(device="24GiB", context=3000, concurrency=3))
    for name, path in class_default_configs(folder).items():
        flag_cases[name] = (str(path), PlanFlags(device="40GiB", context=8192, concurrency=6))
    for name, (model, flags, *deploy) in flag_cases.items():  # deploy: DeployFlags, if any
        src = workbook_source(model, flags, *deploy)
        cases[name] = (src, src.plan(), None)
    for name, (model, flags, sweep) in _envelope_sweeps().items():
        src = workbook_source(model, flags)
        cases[name] = (src, src.plan(), sweep)
    paths = {}
    for name, (src, _, sw) in cases.items():
        paths[name] = save_workbook(build_workbook(src, sw), folder / f"{name}.xlsx")
    plans = {name: case[1] for name, case in cases.items()}
    edits = {**_edits(), **_hybrid_edits(plans), **_random_edits(plans),
             **_random_edits(plans, HYBRID_RANDOM_EDITS, HYBRID_BASES, 2027)}
    replanned = {name: _replanned(src) for name, (src, _, _) in cases.items()}
    for name, (base, cells, changes) in edits.items():
        src = cases[base][0]
        paths[name] = _edited(paths[base], cells, folder / f"{name}.xlsx")
        expected = build_plan(src.spec, replace(src.serve, **changes), src.overrides)
        cases[name] = (src, expected, None)
        replanned[name] = _replanned(src, changes)
    computed = recalc(soffice_bin, list(paths.values()), folder / "recalculated")
    return {name: Case(src, plan, paths[name], computed[name], sw, replanned[name])
            for name, (src, plan, sw) in cases.items()}


def _replanned(src: WorkbookSource, changes: dict | None = None) -> Plan | None:
    """What --from-workbook plans where the deployment's device is not the Ledger sheet's
    whole model: a MoE's routed experts split across data-parallel ranks, or an engine's
    budget (the KV offload cases plan under vLLM's release rules)."""
    dep = src.deployment
    if dep is not None and dep.plan.shard.experts is None and dep.plan.budget is not None \
            and not changes:
        return dep.plan
    if dep is None or dep.plan.shard.experts is None:
        return None
    serve = replace(src.serve, **(changes or {}))
    return build_deployment(src.spec, serve, src.overrides, dep.parallel, src.engine).plan


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
