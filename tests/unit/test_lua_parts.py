"""The Lua scripts' parts: includes resolved once each, no name defined twice, short files."""

import re
from importlib import resources

import pytest

from recheck.shared.config import Settings
from recheck.shared.redis.keys import Keys
from recheck.shared.redis.scripts import INCLUDE, read_part, resolve, script_source
from recheck.shared.redis.store import SCRIPT_NAMES

LUA = resources.files("recheck.shared.redis").joinpath("lua")
FILES = {path.name: path.read_text() for path in LUA.iterdir() if path.name.endswith(".lua")}


def test_a_part_is_inlined_where_named_once_and_its_own_parts_before_it():
    parts = {"_a": "a1\n-- #include _b\na2\n", "_b": "b\n", "_c": "-- #include _b\nc\n"}
    text = "start\n-- #include _a\n-- #include _c\n-- #include _b\nend\n"
    assert resolve(text, parts.__getitem__).splitlines() == [
        "start", "a1", "b", "a2",
        "-- (_b.lua: inlined above)", "c",
        "-- (_b.lua: inlined above)", "end",
    ]  # fmt: skip


def test_an_unknown_part_is_an_error_not_a_script_missing_a_function():
    with pytest.raises(FileNotFoundError):
        resolve("-- #include _nowhere\n", lambda name: (LUA / f"{name}.lua").read_text())


@pytest.mark.parametrize("name", SCRIPT_NAMES)
def test_every_script_resolves_with_each_local_function_defined_once(name):
    text = script_source(name)
    assert not INCLUDE.search(text)
    defined = re.findall(r"^local function (\w+)", text, re.MULTILINE)
    assert len(defined) == len(set(defined)), sorted(n for n in defined if defined.count(n) > 1)


def test_every_part_is_used_and_files_stay_short():
    included = {m for text in FILES.values() for m in INCLUDE.findall(text)}  # by scripts and parts
    parts = {name[:-4] for name in FILES if name.startswith("_")} - {"_lib"}
    assert parts == included
    long = {name for name, text in FILES.items() if len(text.splitlines()) > 150}
    assert not long  # issue 46: no script over 150 lines


def test_the_group_key_block_is_as_long_in_the_scripts_as_in_keys_py():
    """_lib.lua GROUP_KEYS: the scripts name the keys after the block by offset from it."""
    declared = re.search(r"^local GROUP_KEYS = (\d+)$", read_part("_lib"), re.MULTILINE)
    keys = Keys.every_partition(Settings(_env_file=None).default_workload())[0]
    assert declared and int(declared.group(1)) == len(keys.group_keys())
