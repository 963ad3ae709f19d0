"""The house rules, read from the source with `ast` so they stay true.

One import package, `recheck`: the repository's folders are its parts (dispatcher/ is
recheck.dispatcher, workers/ recheck.workers, shared/ recheck.shared, recheck/ the command and
the public API). Imports flow one way: shared <- the roles (dispatcher, workers) <- the command
<- bench. Inside shared: mysql/ and redis/ never import each other, views/ never imports process/.
Every import counts, at module level or inside a function: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from tests.support.helpers import REPO

# Folder -> the package it is installed as.
FOLDERS = {
    "shared": "recheck.shared",
    "dispatcher": "recheck.dispatcher",
    "workers": "recheck.workers",
    "recheck": "recheck",
    "bench": "bench",
}
ROLES = ("recheck.dispatcher", "recheck.workers")
MAX_MODULES_PER_FOLDER = 15
MAX_SHARED_METHODS = 15  # public method names two classes may have in common


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([FOLDERS[parts[0]], *parts[1:]])


def project_modules() -> dict[str, Path]:
    return {module_name(p): p for folder in FOLDERS for p in (REPO / folder).rglob("*.py")}


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


def layer(module: str) -> str:
    """shared, a role, command (the rest of recheck, and every `python -m` entry point) or bench."""
    if module.endswith(".__main__") and module.startswith("recheck"):
        return "command"
    for prefix in ("recheck.shared", *ROLES):
        if module == prefix or module.startswith(prefix + "."):
            return prefix
    return "bench" if module.split(".")[0] == "bench" else "command"


def part_of_shared(module: str) -> str | None:
    """mysql, redis, process, views, or None (shared's top-level modules, or not shared)."""
    parts = module.split(".")
    return parts[2] if module.startswith("recheck.shared.") and len(parts) > 3 else None


def offending(rule, key=layer) -> list[str]:
    return sorted(
        f"{module} imports {target}"
        for module, targets in import_graph().items()
        for target in targets
        if rule(key(module), key(target))
    )


def test_shared_imports_neither_the_roles_nor_the_command_nor_the_bench():
    shared = "recheck.shared"
    assert offending(lambda source, target: source == shared and target != shared) == []


def test_no_role_imports_the_other_role_or_the_command_or_the_bench():
    def broken(source: str, target: str) -> bool:
        return source in ROLES and target not in ("recheck.shared", source)

    assert offending(broken) == []


def test_the_core_imports_only_config_and_errors():
    """shared/core/: the domain values and pure rules every adapter and role builds on;
    shared/policies/ (what each discipline decides) is as pure, and may import the core."""
    allowed = {"recheck.shared.config", "recheck.shared.errors"}
    may_import = {"core": {"core"}, "policies": {"core", "policies"}}
    broken = {
        f"{module} imports {target}"
        for module, targets in import_graph().items()
        if part_of_shared(module) in may_import
        for target in targets
        if part_of_shared(target) not in may_import[part_of_shared(module) or ""] and target not in allowed
    }
    assert broken == set()


def test_the_core_does_no_io():
    """No module of the core (or of the policies) imports a driver, a socket, a file or a process API."""
    io = {"pymysql", "redis", "socket", "subprocess", "os", "pathlib", "http", "urllib", "threading"}
    found = set()
    for path in [*(REPO / "shared" / "core").glob("*.py"), *(REPO / "shared" / "policies").glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
            found |= {f"{path.name}: {n}" for n in names if n.split(".")[0] in io}
    assert found == set()


def test_mysql_and_redis_never_import_each_other_and_views_never_import_process():
    forbidden = {("mysql", "redis"), ("redis", "mysql"), ("views", "process")}
    assert offending(lambda source, target: (source, target) in forbidden, key=part_of_shared) == []


def test_the_command_never_imports_the_bench_at_module_level():
    """`recheck bench` and `recheck soak` import bench only when they run (it is not installed)."""
    for path in (REPO / "recheck").rglob("*.py"):
        tree = ast.parse(path.read_text())
        top_level = [node for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)]
        names = {alias.name for node in top_level if isinstance(node, ast.Import) for alias in node.names}
        names |= {node.module for node in top_level if isinstance(node, ast.ImportFrom)}
        assert not {name for name in names if name and name.split(".")[0] == "bench"}, path
    assert offending(lambda source, target: source != "bench" and target == "bench") == []


def exits_decided(path: Path) -> list[int]:
    """Lines that choose the process's exit code: `raise SystemExit`, `sys.exit()`, `exit()`.
    (The graceful stop's watchdog in shared/process/loop.py ends a process whose main thread is
    stuck on a silent server with os._exit: a thread cannot raise in the main thread. That is
    the process's lifecycle, not an error turned into an exit code.)"""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Raise) and node.exc is not None:
            target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(target, ast.Name) and target.id == "SystemExit":
                found.append(node.lineno)
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            owner = getattr(func.value, "id", "") if isinstance(func, ast.Attribute) else ""
            if (owner, name) in (("sys", "exit"), ("", "exit")):
                found.append(node.lineno)
    return found


def test_only_the_command_layer_decides_the_process_exit():
    """Library code raises recheck's errors (shared/errors.py); the command layer (recheck/commands,
    recheck/cli.py, the `python -m` entry points) alone turns them into exit codes."""
    deciding = {
        f"{module}:{line}"
        for module, path in project_modules().items()
        if layer(module) not in ("command", "bench")
        for line in exits_decided(path)
    }
    assert deciding == set()


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


def test_no_folder_holds_more_than_fifteen_modules():
    crowded = {}
    for folder in FOLDERS:
        for directory in [REPO / folder, *(p for p in (REPO / folder).rglob("*") if p.is_dir())]:
            modules = [p for p in directory.glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
            if len(modules) > MAX_MODULES_PER_FOLDER:
                crowded[str(directory.relative_to(REPO))] = len(modules)
    assert crowded == {}


def public_methods() -> dict[str, set[str]]:
    """class (module.Class) -> its public method names, for every class of the product."""
    found = {}
    for folder in ("shared", "dispatcher", "workers", "recheck"):
        for path in (REPO / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ClassDef):
                    methods = {
                        item.name
                        for item in node.body
                        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                        and not item.name.startswith("_")
                    }
                    found[f"{module_name(path)}.{node.name}"] = methods
    return found


def test_no_two_classes_repeat_fifteen_public_method_names():
    """One path per operation: a second class with the same dozen methods (as the partitioned
    store once was beside the store) means every change is made twice."""
    classes = public_methods()
    names = sorted(classes)
    repeats = {
        (a, b): len(classes[a] & classes[b])
        for i, a in enumerate(names)
        for b in names[i + 1 :]
        if len(classes[a] & classes[b]) >= MAX_SHARED_METHODS
    }
    assert repeats == {}


def test_the_checker_finds_an_import_inside_a_function(tmp_path):
    modules = {"recheck.workers.worker": Path("x"), "recheck.dispatcher.service": Path("y")}
    source = tmp_path / "probe.py"
    source.write_text("def f():\n    from recheck.dispatcher.service import serve\n    import json\n")
    assert imports_of(source, modules) == {"recheck.dispatcher.service"}


def test_modules_are_named_as_installed_and_sorted_into_their_layers():
    assert module_name(REPO / "shared" / "mysql" / "db.py") == "recheck.shared.mysql.db"
    assert module_name(REPO / "workers" / "__init__.py") == "recheck.workers"
    assert layer("recheck.shared.mysql.db") == "recheck.shared" and layer("recheck.cli") == "command"
    assert part_of_shared("recheck.shared.mysql.db") == "mysql"
    assert part_of_shared("recheck.shared.config") is None


def test_the_core_and_the_adapters_are_typed_as_strictly_as_mypy_strict():
    """Issue 46, item 5: `mypy --strict` clean on shared/core, shared/redis and shared/mysql. The
    typecheck (make lint) applies --strict's flags to the modules pyproject.toml lists; this holds
    that the list keeps them and that every flag --strict sets is there."""
    import tomllib

    overrides = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mypy"]["overrides"]
    strict = [o for o in overrides if o.get("disallow_untyped_defs")]
    assert len(strict) == 1
    modules = set(strict[0]["module"])
    assert {"recheck.shared.core.*", "recheck.shared.redis.*", "recheck.shared.mysql.*"} <= modules
    flags = ("disallow_untyped_defs", "disallow_incomplete_defs", "disallow_untyped_calls",
             "disallow_untyped_decorators", "disallow_any_generics", "disallow_subclassing_any",
             "warn_return_any", "no_implicit_reexport", "strict_equality", "extra_checks")  # fmt: skip
    assert all(strict[0].get(flag) is True for flag in flags)


# Reads of the flags that choose a discipline (`workload.once`, ...) outside shared/config.py and
# shared/policies/: each is a decision a policy makes (issue 46, item 1). None is left: ask the
# policy (shared/policies/lifecycle.py `lifecycle_of(w).looks_back`), and a view reads the
# policy's section of the status facts (`facts.priority`, shared/core/records.py).
DISCIPLINE_FLAGS = {"once", "priority_column", "group_column"}


def discipline_flag_reads() -> list[str]:
    found = []
    for module, path in project_modules().items():
        if not module.startswith("recheck") or module == "recheck.shared.config":
            continue
        if module.startswith("recheck.shared.policies"):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute) and node.attr in DISCIPLINE_FLAGS:
                found.append(f"{path.relative_to(REPO)}:{node.lineno} .{node.attr}")
    return found


def test_disciplines_are_asked_of_their_policy_not_read_from_their_flag():
    reads = discipline_flag_reads()
    assert not reads, "\n".join(reads)
