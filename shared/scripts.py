"""The Lua scripts in shared/lua, registered once per Redis client.

Each script is prefixed with _lib.lua (small helpers) before it is sent; redis-py runs it
with EVALSHA and reloads it transparently after a Redis restart empties the script cache.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

import redis

SCRIPT_NAMES = ("dispatch", "pop", "ack", "reclaim", "orphans", "lease")


@cache
def script_source(name: str) -> str:
    folder = resources.files("shared").joinpath("lua")
    return folder.joinpath("_lib.lua").read_text() + folder.joinpath(f"{name}.lua").read_text()


class Scripts:
    def __init__(self, client: redis.Redis):
        self.dispatch = client.register_script(script_source("dispatch"))
        self.pop = client.register_script(script_source("pop"))
        self.ack = client.register_script(script_source("ack"))
        self.reclaim = client.register_script(script_source("reclaim"))
        self.orphans = client.register_script(script_source("orphans"))
        self.lease = client.register_script(script_source("lease"))
