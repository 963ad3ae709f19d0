"""The README is the front door and the docs site (docs/, mkdocs.yml) the manual: both must match the code."""

from __future__ import annotations

import re

from pydantic import SecretStr

from recheck.cli import COMMANDS, TOOLS
from recheck.shared.config import ENV_PREFIX, Settings
from tests.support.helpers import DOCS, REPO, docs_text

README = (REPO / "README.md").read_text()
CONFIGURATION = docs_text("configuration.md")
COMMANDS_PAGE = docs_text("commands.md")
README_MAX_LINES = 200
LINE_MAX = 200  # characters; the README's lines, tables included


def test_every_setting_is_documented_with_its_default():
    for name, field in Settings.model_fields.items():
        variable = f"{ENV_PREFIX}{name.upper()}"
        row = next(
            (line for line in CONFIGURATION.splitlines() if line.startswith(f"| `{variable}` |")), None
        )
        assert row, f"{variable} is missing from docs/configuration.md"
        default = field.default
        if isinstance(default, SecretStr):
            default = default.get_secret_value()
        if default in ("", ()):
            assert "| (none" in row, f"{variable}: docs/configuration.md should say it has no default"
            continue
        shown = f"{default:g}" if isinstance(default, float) else str(default)
        shown = shown.lower() if isinstance(default, bool) else shown  # as TOML and the env spell it
        assert f"`{shown}`" in row, f"{variable}: docs/configuration.md does not show the default {shown!r}"


def test_every_documented_variable_exists():
    known = {f"{ENV_PREFIX}{name.upper()}" for name in Settings.model_fields}
    for page in sorted(DOCS.glob("*.md")):
        documented = set(re.findall(r"\| `(RECHECK_[A-Z_]+)` \|", page.read_text()))
        assert documented <= known, (page.name, documented - known)


def test_every_command_is_documented():
    for command in [*COMMANDS, *TOOLS]:
        assert f"`recheck {command}" in COMMANDS_PAGE, f"recheck {command} is missing from docs/commands.md"


def test_the_quick_start_has_exactly_the_two_make_targets():
    block = README.split("## Quick start", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in block.strip().splitlines()]
    assert commands == ["make demo", "make test"]
    makefile = (REPO / "Makefile").read_text()
    assert "\ndemo:" in makefile and "\ntest:" in makefile
    assert "make test" in (REPO / ".ci" / "run").read_text()


def test_the_readme_is_a_front_door():
    lines = README.splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; the rest belongs in docs/"
    long = [n for n, line in enumerate(lines, 1) if len(line) > LINE_MAX]
    assert not long, f"README.md lines over {LINE_MAX} characters: {long}"


def anchors(page: str) -> set[str]:
    """The heading anchors of a docs page, as mkdocs' toc extension makes them."""
    found = set()
    in_code = False
    for line in docs_text(page).splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and (heading := re.match(r"#+ (.*)", line)):
            text = re.sub(r"[^\w\s-]", "", heading[1].replace("`", "")).strip().lower()
            found.add(re.sub(r"[-\s]+", "-", text))
    return found


def test_the_readme_links_only_to_docs_pages_that_exist():
    links = re.findall(r"\]\(([^)\s]+)\)", README)
    local = [link for link in links if not re.match(r"[a-z]+://", link)]
    assert local, "the README's map of the docs is gone"
    for link in local:
        path, _, anchor = link.partition("#")
        assert path.startswith("docs/") and path.endswith(".md"), f"README links to {link}, not a docs page"
        page = path.removeprefix("docs/")
        assert (DOCS / page).is_file(), f"README links to {link}, which does not exist"
        if anchor:
            assert anchor in anchors(page), f"README links to {link}: no such heading in {path}"
    linked = {link.partition("#")[0].removeprefix("docs/") for link in local}
    pages = {page.name for page in DOCS.glob("*.md")}
    assert pages <= linked, f"docs pages missing from the README's map: {sorted(pages - linked)}"


def test_every_docs_page_is_in_the_site_nav():
    """mkdocs build --strict (make docs) says so too; this says it without building."""
    nav = (REPO / "mkdocs.yml").read_text().split("\nnav:", 1)[1]
    listed = set(re.findall(r":\s*([\w-]+\.md)\s*$", nav, re.MULTILINE))
    assert listed == {page.name for page in DOCS.glob("*.md")}
