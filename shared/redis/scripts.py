"""The Lua scripts' source: each script in lua/ with _lib.lua before it and its parts inlined.

A line `-- #include _name` in a script is replaced by lua/_name.lua's text (each part once per
script, in the order named; a part may name others), so a script is written in parts of one
concern each (the takes: the grant of the limits, a reclaimed group, drops, the groups' turns) and Redis
still runs one script. Files starting with `_` are parts, never scripts of their own.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from importlib import resources

INCLUDE = re.compile(r"^-- #include (_[a-z_]+)$", re.MULTILINE)


def read_part(name: str) -> str:
    return resources.files("recheck.shared.redis").joinpath("lua", f"{name}.lua").read_text()


def resolve(text: str, read: Callable[[str], str], seen: set[str] | None = None) -> str:
    """text with every include replaced by the part's text (resolved the same way); a part
    already inlined is not inlined again. An unknown part raises FileNotFoundError."""
    seen = set() if seen is None else seen

    def inline(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in seen:
            return f"-- ({name}.lua: inlined above)"
        seen.add(name)
        return resolve(read(name), read, seen).rstrip("\n")

    return INCLUDE.sub(inline, text)


@cache
def script_source(name: str) -> str:
    """The text Redis runs for lua/<name>.lua."""
    return resolve(read_part("_lib") + read_part(name), read_part, {"_lib"})
