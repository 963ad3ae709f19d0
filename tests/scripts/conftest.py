"""The scripts' tests: a store on a real Redis alone (no MySQL), on a clock the test sets."""

from __future__ import annotations

import pytest

from recheck.shared.config import Settings
from recheck.shared.redis.connection import connect_redis
from recheck.shared.redis.store import Store, open_store

OWNER = "test-dispatcher"  # holds the lease: its pushes go through


def command_calls(client) -> dict[str, int]:
    """Redis' calls per command since the test's CONFIG RESETSTAT (that one left out)."""
    stats = client.info("commandstats").items()
    return {name: one["calls"] for name, one in stats if "config" not in name}


class Clock:
    """The time the scripts are given, in microseconds of the Unix epoch: far from Redis' own
    (ahead of it, so that keys the scripts expire at a time of this clock stay meanwhile)."""

    def __init__(self) -> None:
        self.now_us = 1_800_000_000_000_000

    def __call__(self) -> int:
        return self.now_us


@pytest.fixture
def make_store(redis_server):
    """make(clock, **settings) -> a Store of the default workload with these settings, on a
    flushed Redis, OWNER holding its lease."""
    client = redis_server.client()
    client.flushall()
    made = []

    def make(clock: Clock, **values) -> Store:
        settings = Settings(_env_file=None, redis_url=redis_server.url(), key_prefix="scripts", **values)
        workload = settings.default_workload()
        redis = connect_redis(workload.deployment)
        made.append(redis)
        store = open_store(redis, workload, clock=clock)
        assert store.hold_lease(OWNER, 60_000) == OWNER
        return store

    yield make
    for redis in made:
        redis.close()
