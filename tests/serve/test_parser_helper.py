"""The body parser's helper processes (a forkserver, its pool worker, the resource tracker)
end with the server, even when the server is killed outright and cannot shut its pool down."""

import time
from pathlib import Path

import pytest
from serve_process import Server

PROC = Path("/proc")


def _table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, state) for every process /proc lists."""
    table = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            try:
                state, ppid = (entry / "stat").read_text().rpartition(")")[2].split()[:2]
            except OSError:  # ended while being read
                continue
            table[int(entry.name)] = (int(ppid), state)
    return table


def _descendants(pid: int) -> set[int]:
    table, found, todo = _table(), set(), [pid]
    while todo:
        parent = todo.pop()
        kids = {p for p, (pp, _) in table.items() if pp == parent and p not in found}
        found |= kids
        todo.extend(kids)
    return found


def _alive(pids: set[int]) -> set[int]:
    table = _table()
    return {p for p in pids if p in table and table[p][1] != "Z"}


@pytest.mark.skipif(not PROC.is_dir(), reason="reads processes from /proc")
def test_the_parsers_helpers_end_when_the_server_is_killed() -> None:
    srv = Server()
    try:
        deadline, helpers = time.monotonic() + 30, set()
        while len(helpers) < 2 and time.monotonic() < deadline:  # forkserver + its worker
            helpers = _descendants(srv.proc.pid)
            time.sleep(0.2)
        assert len(helpers) >= 2, helpers
        srv.proc.kill()  # SIGKILL: no shutdown runs in the server
        srv.proc.wait()
        deadline = time.monotonic() + 20
        while _alive(helpers) and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        srv.stop()
    assert _alive(helpers) == set()
