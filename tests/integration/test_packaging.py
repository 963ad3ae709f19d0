"""What `pip install` gives a user (issues 22 and 31): the wheel built from a clean copy of the
checkout, installed with its dependencies into a fresh virtualenv that holds nothing else, run
from a folder outside the checkout with no PYTHONPATH.

The last version of this test installed the wheel beside the test's own virtualenv, whose
editable install of the checkout supplied a module the wheel lacked (`recheck.commands`): every
installed `recheck` failed at once and the test passed. Here nothing of the checkout is
reachable: the first test proves it by importing `tests` and `bench`, which must fail.
"""

from __future__ import annotations

import subprocess
import zipfile
from pathlib import Path

import pytest

from tests.support.helpers import REPO, scalar, seed_rows
from tests.support.venvs import base_python, build_wheel, clean_env, make_venv
from tests.unit.test_package_list import FOLDERS

DATA = ("recheck/shared/redis/lua/dispatch.lua", "recheck/shared/mysql/queries.sql",
        "recheck/dispatcher/static/dashboard.html")  # fmt: skip


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Path:
    return make_venv(tmp_path_factory.mktemp("venv") / "env", base_python(), str(wheel))


def run(venv: Path, *args: str, env: dict | None = None, cwd: Path, timeout: float = 90):
    """`recheck ARGS` (or `python ARGS` when args[0] is "python") from the fresh virtualenv."""
    program = [str(venv / "bin" / "python")] if args[0] == "python" else [str(venv / "bin" / "recheck")]
    rest = args[1:] if args[0] == "python" else args
    return subprocess.run([*program, *rest], env=clean_env(env), cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


def source_modules() -> set[str]:
    """The installed path of every .py file of the source folders (recheck/commands/run.py, ...)."""
    found = set()
    for folder, package in FOLDERS.items():
        for path in (REPO / folder).rglob("*.py"):
            found.add("/".join([*package.split("."), *path.relative_to(REPO / folder).parts]))
    return found


def test_nothing_of_the_checkout_is_reachable_from_the_virtualenv(venv, tmp_path):
    probe = "import importlib.util as u; print([m for m in ('tests', 'bench', 'pytest') if u.find_spec(m)])"
    result = run(venv, "python", "-c", probe, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_the_wheel_holds_every_module_of_the_source_and_nothing_else(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/", 1)[0] for name in names}
    assert top == {"recheck", next(t for t in top if t.endswith(".dist-info"))}, top
    assert {n for n in names if n.endswith(".py")} == source_modules()
    assert all(name in names for name in DATA)


def test_every_command_answers_from_the_installed_package(venv, settings, tmp_path):
    version = run(venv, "--version", cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("recheck 0."), version.stderr
    helps = [run(venv, name, "--help", cwd=tmp_path) for name in command_names(venv, tmp_path)]
    assert [h.returncode for h in helps] == [0] * len(helps), [h.stderr for h in helps if h.returncode]
    probe = ("import recheck; from recheck import Client, Recheck, per_row, batch; import recheck.shared."
             "mysql.sql as sql; print(recheck.__file__, len(sql.raw_queries()))")  # fmt: skip
    result = run(venv, "python", "-c", probe, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    where, queries = result.stdout.split()
    assert where.startswith(str(venv)) and int(queries) > 10  # its own files, its SQL read
    tool = run(venv, "bench", "--help", cwd=tmp_path)
    assert tool.returncode == 2 and "source checkout's tool" in tool.stderr


def command_names(venv: Path, cwd: Path) -> list[str]:
    """The subcommands the installed `recheck` has (bench and soak, source checkout only, aside)."""
    listed = run(venv, "python", "-c", "from recheck.cli import COMMANDS; print(*COMMANDS)", cwd=cwd)
    assert listed.returncode == 0, listed.stderr
    names = listed.stdout.split()
    assert {"run", "worker", "dispatcher", "config", "status", "init-db"} <= set(names), names
    return names


def test_config_and_a_full_run_work_from_the_installed_package(venv, settings, sql, tmp_path):
    env = {**settings.env_overrides(), "RECHECK_CHECK": "recheck.workers.demo:check"}
    preflight = run(venv, "config", env=env, cwd=tmp_path)
    assert preflight.returncode == 0, preflight.stdout + preflight.stderr
    seed_rows(settings, 500, due_now=True)
    result = run(venv, "run", "--workers", "1", "--duration", "4", env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert scalar(sql, "SELECT COUNT(*) FROM user_block_status WHERE check_count = 0") == 0


def test_tracing_without_opentelemetry_installed_stops_the_worker_with_a_clear_line(venv, settings, tmp_path):
    """The base install has no OpenTelemetry (the `otel` extra): asking for traces is a
    configuration error at start (exit 2), not a crash nor a worker that silently traces nothing."""
    env = {**settings.env_overrides(), "RECHECK_TRACING": "true"}
    result = run(venv, "worker", env=env, cwd=tmp_path, timeout=60)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "RECHECK_TRACING: needs OpenTelemetry: pip install 'recheck[otel]'" in result.stderr
