"""Every source folder that holds Python is a package the wheel ships (issue 31: `recheck.commands`
was missing from pyproject.toml's list, so an installed `recheck` failed at once)."""

from __future__ import annotations

import tomllib
from pathlib import Path

from tests.support.helpers import REPO

# Source folder -> the package it is installed as.
FOLDERS = {"recheck": "recheck", "dispatcher": "recheck.dispatcher", "workers": "recheck.workers",
           "shared": "recheck.shared"}  # fmt: skip


def source_packages() -> dict[str, Path]:
    """Package name -> its folder, for every folder below FOLDERS that holds a .py file."""
    found = {}
    for folder, package in FOLDERS.items():
        for path in (REPO / folder).rglob("*.py"):
            parts = path.parent.relative_to(REPO / folder).parts
            found[".".join([package, *parts])] = path.parent
    return found


def test_every_folder_with_python_is_a_listed_package():
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    assert set(source_packages()) - listed == set(), "add these to [tool.setuptools] packages"
    assert listed - set(source_packages()) == set(), "listed packages with no source folder"
    assert {package: setuptools["package-dir"][package] for package in FOLDERS.values()} == {
        package: folder for folder, package in FOLDERS.items()
    }


def test_every_package_folder_has_an_init():
    assert [name for name, folder in source_packages().items() if not (folder / "__init__.py").exists()] == []
