"""A dispatcher renews its held leases together, one script call per Redis client (renew.lua,
Store.renew_leases, dispatcher/lease.py renew_together), as lease.lua's hold renews one: its
own get their TTL again, one that lapsed with nobody taking it is its own again, one another
holds is left alone; a lease it released or saw lost is not renewed at all."""

from __future__ import annotations

import pytest

from recheck.dispatcher.lease import Lease, renew_together
from recheck.shared.config import Settings
from recheck.shared.redis.connection import connect_redis
from recheck.shared.redis.store import Store, open_store
from tests.scripts.conftest import command_calls

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


def test_held_leases_are_renewed_in_one_call_and_anothers_is_left_alone(stores):
    a, b, c, d = stores
    redis = a.client
    for store in (a, b, d):
        assert store.hold_lease(ME, 1_000) == ME
    assert c.hold_lease(OTHER, 1_000) == OTHER
    Store.renew_leases([d], ME, 1_000)  # (the script loaded: its first call's NOSCRIPT)
    redis.delete(d.keys.leader)  # d's lapsed under a late renewal, nobody took it
    redis.config_resetstat()
    assert Store.renew_leases(stores, ME, 60_000) == [ME, ME, OTHER, ME]
    expected = {"cmdstat_evalsha": 1, "cmdstat_get": 4, "cmdstat_pexpire": 2, "cmdstat_set": 1}
    assert command_calls(redis) == expected
    for store in (a, b, d):
        assert redis.pttl(store.keys.leader) > 50_000
    assert redis.pttl(c.keys.leader) <= 1_000  # another's: its TTL untouched
    assert redis.get(c.keys.leader) == OTHER.encode()


def test_a_lease_released_or_taken_meanwhile_is_not_renewed_one_that_lapsed_is_held_again(stores):
    a, b, c, _ = stores
    leases = [Lease(store, ME, ttl_seconds=60) for store in (a, b, c)]
    for lease in leases:
        assert lease.hold()
    a.client.delete(a.keys.leader)  # lapsed under a slow network, nobody took it
    a.client.set(b.keys.leader, OTHER)  # b went to another dispatcher
    leases[2].release()  # c given up by the other thread just before
    renew_together(leases)
    assert [lease.held for lease in leases] == [True, False, False]
    assert [lease.holder for lease in leases] == [ME, OTHER, None]
    assert a.client.pttl(a.keys.leader) > 50_000
    assert a.client.get(b.keys.leader) == OTHER.encode()
    assert not a.client.exists(c.keys.leader)  # released: not taken back by a renewal
