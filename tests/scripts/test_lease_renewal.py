"""A dispatcher renews its held leases together, one script call per Redis client (renew.lua,
Store.renew_leases, dispatcher/lease.py renew_together): only the caller's leases get their TTL
again, and none is ever taken there (a lease released or lost meanwhile stays so)."""

from __future__ import annotations

import pytest

from recheck.dispatcher.lease import Lease, renew_together
from recheck.shared.config import Settings
from recheck.shared.redis.connection import connect_redis
from recheck.shared.redis.store import Store, open_store

ME, OTHER = "d-me", "d-other"


@pytest.fixture
def stores(redis_server):
    """Four single-partition workloads' stores on one flushed Redis, sharing one client."""
    redis_server.client().flushall()
    settings = Settings(_env_file=None, redis_url=redis_server.url(), key_prefix="renewal")
    client = connect_redis(settings.default_workload().deployment)
    made = []
    for name in "abcd":
        workload = Settings(_env_file=None, redis_url=redis_server.url(), key_prefix=f"renewal-{name}")
        made.append(open_store(client, workload.default_workload()))
    yield made
    client.close()


def calls(client) -> dict[str, int]:
    return {name: one["calls"] for name, one in client.info("commandstats").items() if "config" not in name}


def test_held_leases_are_renewed_in_one_call_and_no_other_is_touched_or_taken(stores):
    a, b, c, d = stores
    redis = a.client
    assert a.hold_lease(ME, 1_000) == ME and b.hold_lease(ME, 1_000) == ME
    assert c.hold_lease(OTHER, 1_000) == OTHER  # d's is free
    Store.renew_leases(stores[3:], ME, 60_000)  # (the script loaded: its first call's NOSCRIPT)
    redis.config_resetstat()
    assert Store.renew_leases(stores, ME, 60_000) == [ME, ME, OTHER, None]
    assert calls(redis) == {"cmdstat_evalsha": 1, "cmdstat_get": 4, "cmdstat_pexpire": 2}
    assert redis.pttl(a.keys.leader) > 50_000 and redis.pttl(b.keys.leader) > 50_000
    assert redis.pttl(c.keys.leader) <= 1_000  # another's: its TTL untouched
    assert not redis.exists(d.keys.leader)  # free: not taken by a renewal


def test_a_lease_lost_meanwhile_is_seen_lost_and_not_taken_back(stores):
    a, b, c, _ = stores
    leases = [Lease(store, ME, ttl_seconds=60) for store in (a, b, c)]
    for lease in leases:
        assert lease.hold()
    a.client.delete(a.keys.leader)  # expired under a paused leader...
    assert b.hold_lease(OTHER, 1_000) == ME  # (b is still mine: another cannot take it)
    a.client.set(b.keys.leader, OTHER)  # ...and b went to another dispatcher
    leases[2].release()  # c given up by the other thread just before
    renew_together(leases)
    assert [lease.held for lease in leases] == [False, False, False]
    assert [lease.holder for lease in leases] == [None, OTHER, None]
    assert not a.client.exists(a.keys.leader) and not a.client.exists(c.keys.leader)
    assert a.client.get(b.keys.leader) == OTHER.encode()
