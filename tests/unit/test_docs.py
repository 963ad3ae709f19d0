"""The README is the front door: it must match the code."""

from __future__ import annotations

import re

from pydantic import SecretStr

from recheck.cli import COMMANDS, TOOLS
from shared.config import ENV_PREFIX, Settings
from tests.support.helpers import REPO

README = (REPO / "README.md").read_text()


def test_every_setting_is_documented_with_its_default():
    for name, field in Settings.model_fields.items():
        variable = f"{ENV_PREFIX}{name.upper()}"
        row = next((line for line in README.splitlines() if line.startswith(f"| `{variable}` |")), None)
        assert row, f"{variable} is missing from the README's configuration table"
        default = field.default
        if isinstance(default, SecretStr):
            default = default.get_secret_value()
        if default == "":
            assert "| (none" in row, f"{variable}: README row should say it has no default"
            continue
        shown = f"{default:g}" if isinstance(default, float) else str(default)
        assert f"`{shown}`" in row, f"{variable}: README row does not show the default {shown!r}"


def test_every_documented_variable_exists():
    documented = set(re.findall(r"\| `(RECHECK_[A-Z_]+)` \|", README))
    known = {f"{ENV_PREFIX}{name.upper()}" for name in Settings.model_fields}
    assert documented <= known, documented - known


def test_every_command_is_documented():
    for command in [*COMMANDS, *TOOLS]:
        assert f"`recheck {command}" in README, command


def test_the_quick_start_has_exactly_the_two_make_targets():
    block = README.split("## Quick start", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in block.strip().splitlines()]
    assert commands == ["make demo", "make test"]
    makefile = (REPO / "Makefile").read_text()
    assert "\ndemo:" in makefile and "\ntest:" in makefile
    assert "make test" in (REPO / ".ci" / "run").read_text()
