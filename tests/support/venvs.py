"""What `pip install` gives a user: the wheel built from a clean copy of the checkout, installed
with its dependencies into a new virtualenv that sees nothing of the checkout or the test's own
environment (tests/integration/test_packaging.py, test_django_tasks.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from recheck.shared.config import ENV_PREFIX
from tests.support.helpers import REPO


def build_wheel(root: Path) -> Path:
    """The wheel, built under `root` from a copy of the checkout's files (what a clean clone holds)."""
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
    return next(root.glob("recheck_mysql-*.whl"))


def make_venv(where: Path, python: str, *requirements: str, installer: str = "pip") -> Path:
    """A new virtualenv (no system site-packages) made by `python`, with `requirements` installed
    (the wheel's path among them) and their dependencies, nothing else. installer "uv": filled by
    the uv of the test's own environment (the dev extras) when it has one, in about a tenth of
    pip's time; the packaging tests keep pip, which is what a user runs."""
    started = time.monotonic()
    subprocess.run([python, "-m", "venv", str(where)], check=True, env=clean_env(), timeout=120)
    target = str(where / "bin" / "python")
    uv = Path(sys.executable).parent / "uv"
    if installer == "uv" and uv.is_file():
        command = [str(uv), "pip", "install", "--quiet", "--python", target]
    else:
        command, installer = [target, "-m", "pip", "install", "-q", "--disable-pip-version-check"], "pip"
    installed = subprocess.run([*command, *requirements], capture_output=True, text=True, env=clean_env(),
                               timeout=600)  # fmt: skip
    assert installed.returncode == 0, installed.stdout + installed.stderr
    print(f"fresh virtualenv ({Path(python).name}) with {len(requirements)} requirement(s) and their "
          f"dependencies, by {installer}: {time.monotonic() - started:.1f} s")  # fmt: skip
    return where


def base_python() -> str:
    """The interpreter the test's own virtualenv was made from (a venv made by a venv's python
    would still be a plain venv, but say it plainly)."""
    return str(Path(sys.base_prefix) / "bin" / "python3")


def python_at_least(version: tuple[int, int]) -> str:
    """An interpreter of this version or newer on the machine (pyenv's too), or fails saying so."""
    wanted = [f"python{version[0]}.{minor}" for minor in range(version[1], version[1] + 3)]
    candidates = [shutil.which(name) for name in wanted]
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates += sorted(str(p) for name in wanted for p in pyenv.glob(f"{name[6:]}*/bin/{name}"))
    for candidate in filter(None, candidates):
        code = f"import sys, venv; print(sys.version_info >= {version!r})"
        probe = subprocess.run([candidate, "-c", code], capture_output=True, text=True, env=clean_env())
        if probe.stdout.strip() == "True":
            return candidate
    raise AssertionError(f"no Python {version[0]}.{version[1]}+ on this machine ({', '.join(wanted)}): "
                         ".ci/run installs one")  # fmt: skip


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment without anything that could reach the checkout or the test's virtualenv."""
    dropped = ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE")
    environment = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX) and k not in dropped}
    environment["PATH"] = os.pathsep.join(
        p for p in environment.get("PATH", "").split(os.pathsep) if not p.startswith(str(REPO))
    )
    environment["PYTHONNOUSERSITE"] = "1"
    return {**environment, **(extra or {})}
