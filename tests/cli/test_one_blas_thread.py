"""The command line keeps numpy's OpenBLAS to one thread (no idle workers polling beside the
simulator), unless the user set OPENBLAS_NUM_THREADS."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

COUNT = ("import os, servecap.cli, servecap.sim.gaps; "
         "print(len(os.listdir('/proc/self/task')), os.environ['OPENBLAS_NUM_THREADS'])")


def _run(env: dict) -> list[str]:
    out = subprocess.run([sys.executable, "-c", COUNT], capture_output=True, text=True,
                         check=True, env=env)
    return out.stdout.split()


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc")
def test_one_thread_by_default_and_the_users_setting_kept() -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    assert _run(env) == ["1", "1"]
    threads, setting = _run(env | {"OPENBLAS_NUM_THREADS": "2"})
    assert setting == "2" and int(threads) == 2
