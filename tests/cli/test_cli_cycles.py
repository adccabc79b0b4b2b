"""cli/ modules import each other in one direction: the commands that take a Scenario and the
flag conversions beneath them form no cycle (lazy imports inside functions count too)."""

import ast
from pathlib import Path

CLI = Path(__file__).resolve().parents[2] / "cli"
KNOWN = {("fit_cmd", "fit_view")}  # fit's view formats the command's candidates: still a pair


def _graph() -> dict[str, set[str]]:
    graph = {}
    for path in CLI.glob("*.py"):
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                deps |= {node.module.split(".")[0]} if node.module else \
                    {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "servecap.cli."):
                deps.add(node.module.split(".")[2])
        graph[path.stem] = deps
    return graph


def test_no_new_import_cycles_in_cli() -> None:
    graph, cycles = _graph(), set()

    def walk(start: str, node: str, path: list[str]) -> None:
        for dep in graph.get(node, ()):
            if dep == start:
                cycles.add(tuple(sorted(path)))
            elif dep not in path and len(path) < 8:
                walk(start, dep, [*path, dep])

    for name in graph:
        walk(name, name, [name])
    assert cycles <= KNOWN, cycles - KNOWN
    assert "plan_cmd" not in graph["workbook_cmd"]
