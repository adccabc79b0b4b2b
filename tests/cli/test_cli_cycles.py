"""cli/ modules import each other in one direction: the commands that take a Scenario and the
flag conversions beneath them form no cycle (lazy imports inside functions count too); and
the pools, step models and deployments are built beneath cli/, in scenario/."""

import ast
from pathlib import Path

CLI = Path(__file__).resolve().parents[2] / "cli"
KNOWN: set[tuple[str, ...]] = set()


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


BUILDERS = {"build_deployment", "build_plan", "rank_coefficients", "pool_blocks",
            "SchedulerConfig", "Deployment", "fleet", "num_blocks"}


def test_no_command_builds_a_pool_a_step_model_or_a_deployment() -> None:
    for path in CLI.glob("*.py"):
        called = {node.func.id if isinstance(node.func, ast.Name) else node.func.attr
                  for node in ast.walk(ast.parse(path.read_text()))
                  if isinstance(node, ast.Call) and isinstance(node.func, ast.Name | ast.Attribute)}
        assert not called & BUILDERS, path.name
