"""Temporary files beside an output target, for writes that are whole or nothing: each is
named .NAME.PID.RANDOM.tmp, removed when its write fails or the process gets SIGTERM, and a
dead process's leftovers (after SIGKILL, a crash, a power cut) are removed by the next write
of the same target. cli/files.py and workbooks/export.py write through here."""

import contextlib
import os
import signal
import tempfile
import threading
import time
from pathlib import Path

UNOWNED_STALE_S = 600  # a .NAME.RANDOM.tmp without a process id is stale after this long
_live: set[str] = set()
_previous_handler = None


@contextlib.contextmanager
def temp_beside(path: Path):
    """(fd, temp path) in the target's folder; the caller writes, closes and renames. On any
    failure (and on SIGTERM meanwhile) the temporary file is removed."""
    path = Path(path)
    clean_stale(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp",
                               dir=path.parent)
    _hold(tmp)
    try:
        yield fd, tmp
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    finally:
        _release(tmp)


def clean_stale(path: Path) -> list[Path]:
    """Remove the .NAME.*.tmp siblings no living process is writing; the removed paths."""
    path = Path(path)
    removed = []
    with contextlib.suppress(OSError):
        for sibling in path.parent.iterdir():
            if _stale(sibling, f".{path.name}."):
                with contextlib.suppress(OSError):
                    sibling.unlink()
                    removed.append(sibling)
    return removed


def _stale(sibling: Path, prefix: str) -> bool:
    name = sibling.name
    if not (name.startswith(prefix) and name.endswith(".tmp")) or not sibling.is_file():
        return False
    owner = name[len(prefix):].split(".")[0]
    if owner.isdigit() and len(name[len(prefix):].split(".")) == 3:
        return not _alive(int(owner))
    return time.time() - sibling.stat().st_mtime > UNOWNED_STALE_S


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's living process
        return True
    except OSError:
        return False
    return True


def _hold(tmp: str) -> None:
    """Track the file; while any is held, SIGTERM first removes them (main thread only)."""
    global _previous_handler
    if not _live and threading.current_thread() is threading.main_thread():
        _previous_handler = signal.signal(signal.SIGTERM, _on_sigterm)
    _live.add(tmp)


def _release(tmp: str) -> None:
    global _previous_handler
    _live.discard(tmp)
    if not _live and _previous_handler is not None and \
            threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _previous_handler)
        _previous_handler = None


def _on_sigterm(signum, frame) -> None:
    for tmp in list(_live):
        Path(tmp).unlink(missing_ok=True)
    previous = _previous_handler
    if callable(previous):
        previous(signum, frame)
        return
    signal.signal(signum, signal.SIG_DFL if previous is None else previous)
    os.kill(os.getpid(), signum)  # end as SIGTERM ends the process, now without leftovers
