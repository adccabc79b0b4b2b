#!/usr/bin/env bash
# The GPU check, prepared to run unattended on one H100/H200 within 11 minutes:
#   1. the `gpu` tests (pytest -m gpu)
#   2. the teaching 7B plan verified on an emulated 40 GiB device (bench/gpu_verify_teaching.py)
#   3. decode tokens/s of an 8B shape against the bandwidth roofline, batch 1 and 32
#   4. the hybrids' state line: Nemotron-H-56B (Mamba-2) and a dense Qwen3-Next shape (gated
#      DeltaNet), 8 layers each, verified on an emulated 16 GiB device (bench/gpu_verify_hybrid.py)
#   5. MoE: Qwen3-30B-A3B (2 layers), DeepSeek-V3 (latent attention; 4 layers, its first MoE
#      layer last) and gpt-oss-20b (sinks, windows; 2 layers) in bf16, each on an emulated device
#      sized for 24 requests of 2,048 tokens (bench/gpu_verify_moe.py)
# Every figure is written as JSON into OUTDIR (summary.json names each step's file and exit code).
#
#   bash bench/gpu_check.sh OUTDIR             # a bare machine with only the repository
#   bash bench/gpu_check.sh OUTDIR --dry-run   # any machine: the current Python, CPU stand-ins
#
# It installs what it needs itself (a virtualenv .venv-gpu: torch from PyPI, whose Linux wheel
# is a CUDA build, then -e .[runtime,excel,dev]). A step that fails is recorded and the next one
# still runs; the script exits 1 when any step failed, 2 when it could not start.
set -uo pipefail

OUT=${1:-}
MODE=${2:-}
if [[ -z "$OUT" || ( -n "$MODE" && "$MODE" != "--dry-run" ) ]]; then
    echo "usage: bash bench/gpu_check.sh OUTDIR [--dry-run]" >&2
    exit 2
fi
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mkdir -p "$OUT" || { echo "gpu_check: cannot create $OUT" >&2; exit 2; }
OUT=$(cd "$OUT" && pwd)
cd "$REPO" || exit 2
START=$(date +%s)

die() { echo "gpu_check: $*" >&2; exit 2; }

if [[ "$MODE" == "--dry-run" ]]; then
    PY=${PYTHON:-$REPO/.venv/bin/python}
    [[ -x "$PY" ]] || PY=$(command -v python3) || die "no python3 found"
    DRY=--dry-run
else
    DRY=
    command -v nvidia-smi >/dev/null || die "nvidia-smi not found: no NVIDIA driver on this machine"
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader \
        > "$OUT/nvidia_smi.txt" || die "nvidia-smi failed (see above): the driver cannot be queried"
    BASE=$(command -v python3.11 || command -v python3) || die "no python3 found"
    [[ -x .venv-gpu/bin/python ]] || "$BASE" -m venv .venv-gpu || die "python3 -m venv failed"
    PY=$REPO/.venv-gpu/bin/python
    echo "== installing (torch, then servecap[runtime,excel,dev]) =="
    "$PY" -m pip install -q --upgrade pip || die "pip upgrade failed"
    if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null
    then
        "$PY" -m pip install -q torch || die "pip install torch failed"
    fi
    "$PY" -m pip install -q -e ".[runtime,excel,dev]" || die "pip install -e .[runtime,excel,dev] failed"
    "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" \
        || die "torch $("$PY" -c 'import torch; print(torch.__version__)') sees no CUDA device"
fi
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-8}

declare -A RC SECONDS_TAKEN
step() {  # step NAME TIMEOUT_S COMMAND...
    local name=$1 limit=$2 t0
    shift 2
    echo "== $name (at most ${limit} s) =="
    t0=$(date +%s)
    timeout "$limit" "$@" 2>&1 | tee "$OUT/$name.log"
    RC[$name]=${PIPESTATUS[0]}
    SECONDS_TAKEN[$name]=$(( $(date +%s) - t0 ))
    echo "== $name: exit ${RC[$name]} after ${SECONDS_TAKEN[$name]} s =="
}

step gpu_tests 150 "$PY" -m pytest -q -m gpu -p no:cacheprovider \
    --junitxml="$OUT/gpu_tests.xml" tests/
"$PY" - "$OUT/gpu_tests.xml" "$OUT/gpu_tests.json" <<'EOF'
import json, sys, xml.etree.ElementTree as ET
try:
    suite = ET.parse(sys.argv[1]).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    keys = ("tests", "failures", "errors", "skipped", "time")
    out = {k: float(suite.get(k, 0)) for k in keys}
    out["failed"] = [c.get("classname") + "::" + c.get("name") for c in suite.iter("testcase")
                     if c.find("failure") is not None or c.find("error") is not None]
except (OSError, ET.ParseError) as exc:
    out = {"error": f"no test report: {exc}"}
json.dump(out, open(sys.argv[2], "w"), indent=2)
EOF
step teaching_7b 240 "$PY" bench/gpu_verify_teaching.py $DRY --json-out "$OUT/teaching_7b.json"
step decode_roofline 120 "$PY" bench/gpu_decode_roofline.py $DRY \
    --json-out "$OUT/decode_roofline.json"
step hybrid_state 180 "$PY" bench/gpu_verify_hybrid.py $DRY --json-out "$OUT/hybrid_state.json"
step moe_verify 150 "$PY" bench/gpu_verify_moe.py $DRY --json-out "$OUT/moe_verify.json"

FAILED=0
{
    echo "{"
    echo "  \"dry_run\": $([[ -n "$DRY" ]] && echo true || echo false),"
    echo "  \"total_s\": $(( $(date +%s) - START )),"
    echo "  \"steps\": {"
    sep=""
    for name in gpu_tests teaching_7b decode_roofline hybrid_state moe_verify; do
        printf '%s    "%s": {"exit_code": %s, "seconds": %s, "figures": "%s.json", "log": "%s.log"}' \
            "$sep" "$name" "${RC[$name]}" "${SECONDS_TAKEN[$name]}" "$name" "$name"
        sep=$',\n'
        [[ "${RC[$name]}" == 0 ]] || FAILED=1
    done
    echo
    echo "  }"
    echo "}"
} > "$OUT/summary.json"
cat "$OUT/summary.json"
exit $FAILED
