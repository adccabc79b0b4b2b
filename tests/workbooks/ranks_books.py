"""The multi-GPU and engine workbooks the Ranks sheet tests read: each case planned with
--json and --xlsx, and recalculated in LibreOffice once for every test file
(conftest.py's session fixture `engine_books`)."""

import json
from pathlib import Path

from conftest import BUNDLED, recalc
from typer.testing import CliRunner

from servecap.cli.app import app
from servecap.ledger.errors import SpecError
from servecap.ledger.vllm_log import parse_vllm_log

RUNNER = CliRunner()
VARIANTS = {
    "70b-tp4-vllm": ["llama-3.1-70b-instruct", "--device", "h100-80gb", "-tp", "4",
                     "--engine", "vllm"],
    "70b-tp2-pp2-vllm": ["llama-3.1-70b-instruct", "--device", "h100-80gb", "-tp", "2",
                         "-pp", "2", "--engine", "vllm", "--context", "32768"],
    "8b-pp3-plain": ["llama-3.1-8b", "--device", "40GiB", "-pp", "3"],
    "8b-tp2-plain-lengths": ["llama-3.1-8b", "--device", "24GiB", "-tp", "2", "--lengths",
                             "17,33,65,65", "--shared-prefix", "16"],
    "gemma-tp2-sglang": ["gemma-2-9b-it", "--device", "h100-80gb", "-tp", "2", "--engine",
                         "sglang", "--lengths", "100,5000,5000", "--shared-prefix", "64"],
    "gemma-tp2-vllm-window": ["gemma-2-9b-it", "--device", "h100-80gb", "-tp", "2", "--engine",
                              "vllm", "--lengths", "100,4111,5000", "--block-size", "16"],
    "gemma-pp2-sglang-knob": ["gemma-2-9b-it", "--device", "h100-80gb", "-pp", "2",
                              "--engine", "sglang", "--mem-fraction-static", "0.8"],
    "qwen-pp2-dp2-trtllm": ["qwen3-30b-a3b", "--device", "h100-80gb", "-pp", "2", "-dp", "2",
                            "--engine", "trtllm", "--free-gpu-memory-fraction", "0.8"],
    "gptoss-tp2-vllm-measured": ["gpt-oss-20b", "--device", "h100-80gb", "-tp", "2",
                                 "--engine", "vllm", "--kv-cache-memory", "20G", "--non-torch",
                                 "0.4GiB", "--cuda-graph-memory", "1GiB", "--comm-buffer",
                                 "2GiB"],
    "deepseek-tp8-vllm": ["deepseek-v3", "--device", "2TiB", "-tp", "8", "--engine", "vllm",
                          "--gpu-memory-utilization", "0.85", "--kv-dtype", "fp8"],
    "deepseek-tp8-vllm-0.6.5": ["deepseek-v3", "--device", "h200-141gb", "-tp", "8", "--engine",
                                "vllm==0.6.5", "--context", "8192"],  # per-head K and V
    "8b-vllm-weights": ["llama-3.1-8b", "--device", "h100-80gb", "--engine", "vllm",
                        "--weights", "14.99GiB", "--concurrency", "300", "--context", "8192"],
    # hybrids: vLLM's page arithmetic (docs/hybrid.md), every engine, pipeline stages, lengths
    "qwen36-tp4-vllm-long": ["qwen3.6-35b-a3b", "--device", "h100-80gb", "-tp", "4",
                             "--engine", "vllm", "--context", "131072", "--concurrency", "2"],
    "qwen36-pp2-vllm-fp8": ["qwen3.6-35b-a3b", "--device", "h100-80gb", "-pp", "2",
                            "--engine", "vllm", "--context", "32768", "--kv-dtype", "fp8"],
    "nemotron-tp4-pp2-lengths": ["nemotron-3-nano-30b-a3b", "--device", "h100-80gb", "-tp",
                                 "4", "-pp", "2", "--engine", "vllm", "--lengths",
                                 "100,5000,8192"],
    "nemotron-tp2-plain": ["nemotron-3-nano-30b-a3b", "--device", "h100-80gb", "-tp", "2",
                           "--context", "8192", "--concurrency", "9"],
    "qwen36-tp2-sglang": ["qwen3.6-35b-a3b", "--device", "h100-80gb", "-tp", "2", "--engine",
                          "sglang", "--context", "8192", "--concurrency", "9"],
    "deepseek32-tp8-trtllm": ["deepseek-v3.2", "--device", "2TiB", "-tp", "8", "--engine",
                              "trtllm", "--context", "8192", "--concurrency", "9"],
    "deepseek32-pp2-vllm": ["deepseek-v3.2", "--device", "2TiB", "-pp", "2", "--engine", "vllm",
                            "--context", "16384", "--kv-dtype", "fp8", "--block-size", "64"],
    "llama4-tp2-pp2-lengths": ["llama-4-scout-17b-16e-instruct", "--device", "h100-80gb", "-tp",
                               "2", "-pp", "2", "--engine", "vllm", "--lengths",
                               "100,9000,100000", "--shared-prefix", "64"],
    "gemma4-tp8-vllm": ["gemma-4-26b-a4b", "--device", "h100-80gb", "-tp", "8", "--engine",
                        "vllm", "--context", "8192"],
    # the official config: the vision tower vLLM loads (SigLIP's linear layers split over tp)
    "gemma3-27b-tp2-vllm-tower": [str(Path(__file__).resolve().parents[1] / "fixtures" / "configs"
                                      / "google--gemma-3-27b-it"), "--device", "h100-80gb",
                                  "-tp", "2", "--engine", "vllm==0.19.0", "--context", "8192"],
    "gemma4-tp4-vllm-fp8": ["gemma-4-26b-a4b", "--device", "h100-80gb", "-tp", "4", "--engine",
                            "vllm", "--kv-dtype", "fp8", "--context", "20000"],
    "qwen36-vllm-0.10": ["qwen3.6-35b-a3b", "--device", "h100-80gb", "-tp", "2", "--engine",
                         "vllm==0.10", "--context", "8192"],
    # per-layer shapes (issue 37): KV-sharing layers and per-kind K/V sizes on the other engines
    "gemma4-e2b-tp2-sglang": ["gemma-4-e2b-it", "--device", "h100-80gb", "-tp", "2", "--engine",
                              "sglang", "--context", "8192", "--concurrency", "9"],
    "mimo-v2-tp8-trtllm": ["mimo-v2-flash", "--device", "2TiB", "-tp", "8", "--engine",
                           "trtllm", "--context", "8192", "--concurrency", "9"],
    # pools that hold a request, but the graphs and the sampler warm-up find no room after them
    "8b-vllm-after-pool": ["llama-3.1-8b", "--device", "h100-80gb", "--engine", "vllm==0.19",
                           "--context", "8192", "--gpu-memory-utilization", "0.99"],
    "qwen36-tp4-vllm-after-pool": ["qwen3.6-35b-a3b", "--device", "h100-80gb", "-tp", "4",
                                   "--engine", "vllm", "--context", "131072", "--concurrency",
                                   "2", "--gpu-memory-utilization", "0.99"],
    "gemma-tp2-vllm-window-after-pool": ["gemma-2-9b-it", "--device", "h100-80gb", "-tp", "2",
                                         "--engine", "vllm", "--lengths", "100,4111,5000",
                                         "--gpu-memory-utilization", "0.99"],
}
AFTER_POOL = tuple(name for name in VARIANTS if name.endswith("after-pool"))
# A real vLLM startup log of a gated-DeltaNet hybrid (issue 652 of noonghunna/club-3090, vLLM
# 0.24.0, tests/fixtures/vllm_logs): its KV pool, max_model_len and flags as planned flags.
LOG = Path(__file__).resolve().parents[1] / "fixtures" / "vllm_logs" / \
    "v1_qwen36_35b_a3b_nvfp4_5090_club652.log"
# Each ranks entry of plan --json -> the Ranks sheet row (its key in column A).
ROWS = {"weights_bytes": "weights", "weight_metadata_bytes": "weight_metadata",
        "runtime_peak_bytes": "runtime_peak", "safety_bytes": "safety",
        "kv_bytes_per_token": "kv_bytes_per_token", "kv_bytes_per_request": "kv_bytes_per_request",
        "kv_bytes_total": "kv_cache", "committed_bytes": "committed", "free_bytes": "free",
        "memory_ceiling_requests": "ceiling", "fits": "fits", "kv_pool_bytes": "kv_pool_bytes",
        "num_gpu_blocks": "num_gpu_blocks", "kv_cache_tokens": "kv_cache_tokens",
        "block_bytes": "block_bytes", "blocks_per_request": "blocks_per_request",
        "binding": "binding", "max_concurrency": "max_concurrency"}
TOTALS = ("binding_rank", "total_ceiling_requests", "weights_bytes_all_devices")


def plan_json(args: list[str]) -> tuple[int, dict]:
    result = RUNNER.invoke(app, ["plan", *args, "--json"])
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.stdout)


def engine_cases() -> dict[str, list[str]]:
    """Every bundled model under vLLM on two GPUs where tp=2 is allowed, plus the variants."""
    from servecap.cli.deploy import DeployFlags
    from servecap.cli.inputs import PlanFlags
    from servecap.cli.plan_cmd import deployment_from_flags

    cases = dict(VARIANTS)
    facts = parse_vllm_log(LOG.read_text())
    cases["qwen36-5090-log"] = ["qwen3.6-35b-a3b", "--device", "32GiB", "--engine", "vllm",
                                "--kv-dtype", "fp8", "--context", str(facts.max_model_len),
                                "--max-num-batched-tokens", "8192", "--kv-cache-memory",
                                str(facts.gib_bytes("kv_pool_gib"))]
    for model in BUNDLED:
        try:
            deployment_from_flags(model, PlanFlags(device="2TiB", context=4096),
                                  DeployFlags(tensor_parallel_size=2, engine="vllm"))
        except SpecError:
            continue
        cases[f"{model}-tp2-vllm"] = [model, "--device", "2TiB", "--context", "4096",
                                      "--concurrency", "4", "-tp", "2", "--engine", "vllm"]
    return cases


def build_books(soffice_bin: str, folder: Path) -> dict[str, tuple[int, dict, Path, Path]]:
    """Every engine case written with --xlsx and recalculated by LibreOffice in one run:
    name -> (exit code, plan --json, the workbook, its recalculated copy)."""
    written = {}
    for name, args in engine_cases().items():
        path = folder / f"{name}.xlsx"
        code, out = plan_json([*args, "--xlsx", str(path)])
        written[name] = (code, out, path)
    computed = recalc(soffice_bin, [w[2] for w in written.values()], folder / "recalculated")
    return {name: (code, out, path, computed[name]) for name, (code, out, path)
            in written.items()}


def sheet_rows(ws) -> dict[str, int]:
    return {ws.cell(row=r, column=1).value: r for r in range(1, ws.max_row + 1)}


