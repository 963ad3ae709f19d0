"""The house rules, read from the source with `ast` so they stay true.

Imports flow one way: shared <- the roles (dispatcher, workers) <- the command (recheck) <- bench.
Every import counts, at module level or inside a function: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from tests.support.helpers import REPO

PACKAGES = ("shared", "dispatcher", "workers", "recheck", "bench")
ROLES = ("dispatcher", "workers")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules() -> dict[str, Path]:
    return {module_name(p): p for package in PACKAGES for p in (REPO / package).rglob("*.py")}


def imports_of(path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules `path` imports, anywhere in the file."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from a.b import c` imports a.b, and a.b.c too when c is a module.
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        for name in names:
            if name in modules:
                found.add(name)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    return {name: imports_of(path, modules) for name, path in modules.items()}


def package(module: str) -> str:
    return module.split(".", 1)[0]


def offending(rule) -> list[str]:
    return sorted(
        f"{module} imports {target}"
        for module, targets in import_graph().items()
        for target in targets
        if rule(package(module), package(target))
    )


def test_shared_imports_neither_the_roles_nor_the_command_nor_the_bench():
    assert offending(lambda source, target: source == "shared" and target != "shared") == []


def test_no_role_imports_the_other_role_or_the_command_or_the_bench():
    def broken(source: str, target: str) -> bool:
        return source in ROLES and target not in ("shared", source)

    assert offending(broken) == []


def test_the_command_never_imports_the_bench_at_module_level():
    """`recheck bench` and `recheck soak` import bench only when they run (it is not in the image)."""
    tree = ast.parse((REPO / "recheck" / "cli.py").read_text())
    top_level = [node for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)]
    names = {alias.name for node in top_level if isinstance(node, ast.Import) for alias in node.names}
    names |= {node.module for node in top_level if isinstance(node, ast.ImportFrom)}
    assert not {name for name in names if name and package(name) == "bench"}
    assert (
        offending(lambda source, target: source in ("shared", *ROLES, "recheck") and target == "bench") == []
    )


def test_there_is_no_import_cycle_among_the_projects_modules():
    graph = import_graph()
    state: dict[str, int] = defaultdict(int)  # 0 new, 1 on the current path, 2 done
    cycles = []

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph[module]):
            if state[target] == 1:
                cycles.append(" -> ".join([*path[path.index(target) :], target]))
            elif state[target] == 0:
                visit(target, [*path, target])
        state[module] = 2

    for module in sorted(graph):
        if state[module] == 0:
            visit(module, [module])
    assert cycles == []


def test_the_checker_finds_an_import_inside_a_function(tmp_path):
    modules = {"workers.worker": Path("x"), "dispatcher.service": Path("y")}
    source = tmp_path / "probe.py"
    source.write_text("def f():\n    from dispatcher.service import serve\n    import json\n")
    assert imports_of(source, modules) == {"dispatcher.service"}
