"""One installable package (issue 22): the wheel built from a clean copy installs `recheck` and
nothing else, carries its Lua, SQL and dashboard page, and runs from a non-editable install.

The wheel is installed with `pip install --target` into a folder of its own, which comes first
on PYTHONPATH; the test's own virtualenv provides the dependencies (the editable install of the
checkout is never reached: the checks below see the installed files)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from recheck.shared.config import ENV_PREFIX
from tests.support.helpers import REPO, scalar, seed_rows

DATA = ("recheck/shared/redis/lua/dispatch.lua", "recheck/shared/mysql/queries.sql",
        "recheck/dispatcher/static/dashboard.html")  # fmt: skip


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path]:
    """(the wheel, the folder it is installed in), built from a copy of the checkout's files."""
    root = tmp_path_factory.mktemp("wheel")
    copy = root / "src"
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True,
                            text=True, check=True).stdout.split()  # fmt: skip
    for name in listed:
        if (REPO / name).is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, copy / name)
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
    built = subprocess.run([*pip_wheel, "-w", str(root), str(copy)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    wheel = next(root.glob("recheck_mysql-*.whl"))
    target = root / "site"
    pip = [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)]
    assert subprocess.run(pip, capture_output=True).returncode == 0
    return wheel, target


def run(target: Path, *args: str, env: dict | None = None, cwd: Path) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
    environment.update({**(env or {}), "PYTHONPATH": str(target)})
    return subprocess.run([sys.executable, *args], env=environment, cwd=cwd, capture_output=True, text=True,
                          timeout=90)  # fmt: skip


def test_the_wheel_holds_only_the_recheck_package_with_its_data(installed):
    wheel, _ = installed
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/", 1)[0] for name in names}
    assert top == {"recheck", next(t for t in top if t.endswith(".dist-info"))}, top
    assert all(name in names for name in DATA)
    assert not [n for n in names if n.startswith(("recheck/bench", "recheck/tests", "bench/", "tests/"))]


def test_the_installed_package_answers_and_exports_its_api(installed, tmp_path):
    _, target = installed
    probe = ("import recheck, recheck.shared.mysql.sql as sql; from recheck import Recheck, per_row; "
             "print(recheck.__file__); print(len(sql.raw_queries()))")  # fmt: skip
    result = run(target, "-c", probe, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    where, queries = result.stdout.split()
    assert where.startswith(str(target)) and int(queries) > 10  # its own files, its SQL read
    version = run(target, "-m", "recheck", "--version", cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("recheck 0."), version.stderr
    tool = run(target, "-m", "recheck", "bench", "--help", cwd=tmp_path)
    assert tool.returncode == 2 and "source checkout's tool" in tool.stderr


def test_a_full_run_works_from_the_installed_package(installed, settings, sql, tmp_path):
    _, target = installed
    seed_rows(settings, 500, due_now=True)
    env = {**settings.env_overrides(), "RECHECK_CHECK": "recheck.workers.demo:check"}
    result = run(target, "-m", "recheck", "run", "--workers", "1", "--duration", "4", env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert scalar(sql, "SELECT COUNT(*) FROM user_block_status WHERE check_count = 0") == 0
