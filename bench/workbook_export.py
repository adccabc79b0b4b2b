"""Print how long a capacity workbook takes to build, save, and recalculate in LibreOffice."""

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from servecap.cli.deploy import DeployFlags
from servecap.cli.inputs import PlanFlags
from servecap.cli.workbook_cmd import workbook_source
from servecap.model_configs import bundled_models
from servecap.workbooks.export import build_workbook, save_workbook


def main() -> None:
    folder = Path(tempfile.mkdtemp(prefix="servecap-bench-"))
    paths = []
    for model in (p.stem for p in bundled_models()):
        start = time.perf_counter()
        src = workbook_source(model, PlanFlags(device="2TiB", context=4096, concurrency=8))
        paths.append(save_workbook(build_workbook(src), folder / f"{model}.xlsx"))
        elapsed = time.perf_counter() - start
        print(f"{model:26s} build+save {elapsed * 1e3:7.1f} ms  {paths[-1].stat().st_size:,} B")
    paths.append(_tp8_engine_plan(folder))
    binary = shutil.which("soffice")
    if binary is None:
        print("soffice not found: recalculation not timed", file=sys.stderr)
        return
    profile = Path(tempfile.mkdtemp(prefix="servecap-lo-profile-"))
    start = time.perf_counter()
    subprocess.run([binary, f"-env:UserInstallation={profile.as_uri()}", "--headless",
                    "--convert-to", "xlsx", "--outdir", str(folder / "out"), *map(str, paths)],
                   check=True, capture_output=True)
    elapsed = time.perf_counter() - start
    print(f"LibreOffice recalculation of {len(paths)} workbooks in one run: {elapsed:.2f} s")
    shutil.rmtree(profile, ignore_errors=True)
    shutil.rmtree(folder, ignore_errors=True)


def _tp8_engine_plan(folder: Path) -> Path:
    """A Ranks sheet of 8 columns: llama-3.1-70b-instruct on h100-80gb -tp 8 --engine vllm
    (plan every rank, build, save with cached values); the median of 5 runs."""
    times = []
    for i in range(5):
        start = time.perf_counter()
        src = workbook_source("llama-3.1-70b-instruct", PlanFlags(device="h100-80gb"),
                              DeployFlags(tensor_parallel_size=8, engine="vllm"))
        path = save_workbook(build_workbook(src), folder / "tp8-vllm.xlsx", force=i > 0)
        times.append(time.perf_counter() - start)
    median = sorted(times)[len(times) // 2]
    print(f"{'70b -tp 8 --engine vllm':26s} build+save {median * 1e3:7.1f} ms  "
          f"{path.stat().st_size:,} B (median of 5)")
    return path


if __name__ == "__main__":
    main()
