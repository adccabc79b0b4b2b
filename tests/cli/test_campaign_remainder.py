"""The rest of the file-and-flag campaign (its flag cases are in test_hostile_flags.py): each
case used to trace back, hang or exit 0 with a silent guess; now it is one named line and
exit 2, or a bounded answer. Temporary output files never outlive their write: SIGTERM
removes them, and a SIGKILLed writer's leftovers are removed by the next write of the same
target."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from servecap.model_configs.writing import clean_stale

ROOT = Path(__file__).resolve().parents[2]
TINY = (ROOT / "model_configs" / "tiny-llama.yaml").read_text()
H100 = ("--device", "h100-80gb")


def test_heads_that_do_not_divide_hidden_size_need_a_head_dim(run, tmp_path) -> None:
    text = TINY.replace("head_dim: 16\n", "").replace("hidden_size: 64", "hidden_size: 66")
    path = tmp_path / "m.yaml"
    path.write_text(text)
    result = run("plan", path, "--device", "1GiB")
    assert result.exit_code == 2
    assert "head_dim" in result.stderr and "hidden_size 66 is not a multiple" in result.stderr


def test_a_huge_notes_list_is_echoed_bounded_and_fast(run, tmp_path) -> None:
    notes = "".join(f"  - note {i} [red]not markup[/blue]\n" for i in range(200_000))
    path = tmp_path / "m.yaml"
    path.write_text(TINY.replace("\nnotes:", "\nold_notes:") + "notes:\n" + notes)
    start = time.monotonic()
    result = run("plan", path, "--device", "1GiB")
    assert result.exit_code == 0, result.output
    assert time.monotonic() - start < 60  # 200,000 notes once took minutes to parse and echo
    shown = [line for line in result.stdout.splitlines() if line.startswith("note:")]
    assert len(shown) <= 13 and "199,988 more notes" in shown[-1]
    assert "[red]not markup[/blue]" in result.stdout  # the file's text, not rich markup


def _writer_script(target: Path) -> str:
    return ("import time, sys\nfrom servecap.model_configs.writing import temp_beside\n"
            f"with temp_beside(__import__('pathlib').Path({str(target)!r})) as (fd, tmp):\n"
            "    print(tmp, flush=True)\n    time.sleep(60)\n")


def test_sigterm_removes_the_temporary_file(tmp_path) -> None:
    target = tmp_path / "out.csv"
    proc = subprocess.Popen([sys.executable, "-c", _writer_script(target)],
                            stdout=subprocess.PIPE, text=True)
    tmp = Path(proc.stdout.readline().strip())
    assert tmp.exists() and tmp.name.startswith(f".out.csv.{proc.pid}.")
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGTERM  # it still ends as SIGTERM ends a process
    assert not tmp.exists() and list(tmp_path.iterdir()) == []


def test_a_sigkilled_writers_leftover_is_removed_by_the_next_write(run, tmp_path) -> None:
    target = tmp_path / "records.csv"
    proc = subprocess.Popen([sys.executable, "-c", _writer_script(target)],
                            stdout=subprocess.PIPE, text=True)
    leftover = Path(proc.stdout.readline().strip())
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert leftover.exists()  # nothing runs on SIGKILL
    mine = tmp_path / f".records.csv.{os.getpid()}.abcd1234.tmp"  # a living writer's
    mine.write_text("x")
    old = tmp_path / ".records.csv.k2j4h5g6.tmp"  # an unowned one, an hour old
    old.write_text("x")
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0,8,4\n")
    result = run("simulate", "teaching-7b", *H100, "--trace", trace, "--records", target)
    assert result.exit_code == 0, result.output
    assert target.exists() and not leftover.exists() and not old.exists()
    assert mine.exists()  # a write in progress elsewhere is left alone
    assert clean_stale(target) == []
