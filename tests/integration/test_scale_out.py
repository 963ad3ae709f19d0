"""Scale-out on real servers: a workload partitioned over several key sets, and one deployment
keeping tables on two MariaDB servers fresh (the "one workload per MySQL shard" pattern)."""

from __future__ import annotations

import time

from recheck.commands.init_db import init_db
from recheck.shared.core.records import WorkerBeat
from recheck.shared.process.presence import Presence
from recheck.shared.redis.store import Counts
from recheck.shared.workloads import read_workloads
from tests.support.checks import ok
from tests.support.helpers import fresh_status, make_store, scalar, seed_rows
from tests.support.servers import MariaDBServer, wait_for


def test_a_partitioned_workload_spreads_its_ids_and_every_row_is_checked(make_settings, sql, make_worker):
    settings = make_settings(partitions=8)
    seed_rows(settings, 3000, due_now=True)
    store = make_store(settings)
    from recheck.dispatcher.dispatcher import START
    from tests.support.helpers import make_pusher

    page = make_pusher(settings).push_page(START, 5000)
    assert page.pushed == 3000
    depths = [store.client.llen(keys.queue) for keys in store.partitions]
    assert len(depths) == 8 and min(depths) > 250, depths  # about 375 each
    worker = make_worker(settings, ok)
    for _ in range(40):
        worker.lane(settings.name).poll()
        if store.overview().in_flight == 0:
            break
    assert scalar(sql, "SELECT COUNT(*) FROM user_block_status WHERE check_count = 0") == 0
    view = store.overview()
    assert (view.queue_depth, view.in_flight, view.counters["checked"]) == (0, 0, 3000)


def test_takes_fill_up_from_the_next_partitions_and_acks_return_entries_to_their_own(make_settings):
    store = make_store(make_settings(partitions=4))
    assert store.hold_lease("me", 60_000) == "me"
    entries = [b"%d:%d" % (i, 1000 + i) for i in range(1, 401)]
    assert store.push("me", entries).pushed == 400
    depths = [store.client.llen(keys.queue) for keys in store.partitions]
    Presence(store, "worker", "w", 60).publish(WorkerBeat(id="w"))
    first = store.take("w", max(depths) + 10).entries  # more than any one partition holds
    assert len(first) == max(depths) + 10
    assert len({store.partition_of(e) for e in first}) >= 2
    second = store.take("w", 50).entries  # the next take starts one partition further
    assert len(second) == 50 and set(first).isdisjoint(second)
    # Untouched entries go back to the partition each came from; finished ones are released.
    assert store.acknowledge("w", first, second, Counts(checked=len(first)), whole=True).still_held == len(
        first
    )
    for index, keys in enumerate(store.partitions):
        queued = store.client.lrange(keys.queue, 0, -1)
        assert all(store.partition_of(e) == index for e in queued)
    assert store.overview().in_flight == 400 - len(first)
    assert store.held_count("w") == 0
    assert store.overview().counters["checked"] == len(first)  # counted once


def test_a_reclaimed_group_is_taken_alone_even_when_a_take_spans_partitions(make_settings):
    store = make_store(make_settings(partitions=2))
    assert store.hold_lease("me", 60_000) == "me"
    entries = [b"%d:%d" % (i, 1000 + i) for i in range(1, 41)]
    store.push("me", entries)
    by_part = {i: [e for e in entries if store.partition_of(e) == i] for i in range(store.count)}
    group = b" ".join(by_part[1][:3])
    keys = store.partitions[1]
    for entry in by_part[1][:3]:  # as the reclaimer leaves them: out of the queue, in a group
        store.client.lrem(keys.queue, 1, entry)
    store.client.rpush(keys.suspects, group)
    Presence(store, "worker", "w", 60).publish(WorkerBeat(id="w"))
    takes = [store.take("w", 1000) for _ in range(3)]
    alone = [t for t in takes if t.suspect]
    assert len(alone) == 1 and sorted(alone[0].entries) == sorted(group.split(b" "))
    assert all(not set(t.entries) & set(group.split(b" ")) for t in takes if not t.suspect)


def test_a_half_taken_partitioned_lease_ends_with_one_holder(make_settings):
    store = make_store(make_settings(partitions=4))
    assert store.hold_lease("a", 60_000) == "a"
    store.client.delete(store.partitions[0].leader)  # a's first lease expired, not the rest
    assert store.hold_lease("b", 60_000) == "a"  # b holds the first, a still the others
    assert store.hold_lease("a", 60_000) == "b"  # a sees b leads and gives its others back
    assert store.hold_lease("b", 60_000) == "b"  # b now holds them all
    assert set(store.lease_holders()) == {"b"}
    assert store.push("a", [b"1:1"]).pushed == -1  # a deposed leader pushes nothing


SHARDS = """
[workloads.shard0]
mysql_url = "{first}"
partitions = 4

[workloads.shard1]
mysql_url = "{second}"
partitions = 4
"""


def test_one_deployment_keeps_tables_on_two_mariadb_servers_fresh(make_settings, mariadb, tmp_path, procs):
    """One workload per MySQL server, the same table and check: one dispatcher and one worker
    pool keep both fresh; status reports each shard."""
    settings = make_settings(interval=2.0)
    second = MariaDBServer(tmp_path / "second-mariadb")
    second.start()
    try:
        config = tmp_path / "recheck.toml"
        config.write_text(SHARDS.format(first=settings.mysql_url, second=second.url("shard1")))
        base = settings.evolve(**{"config": str(config)})
        shards = read_workloads(base)
        for shard in shards:
            assert init_db(shard, apply=False, say=lambda _: None, create=True) == 0
            seed_rows(shard, 300)  # 150 checks/s each: well within a busy 2-core machine's reach
        env = {"RECHECK_CONFIG": str(config), "RECHECK_CHECK": "tests.support.checks:ok"}
        procs.start("dispatcher", settings, env=env)
        procs.start("worker", settings, env=env)
        procs.start("worker", settings, env=env)
        conns = [mariadb.connect(settings.mysql.database), second.connect("shard1")]

        def checked_twice() -> bool:
            least = "SELECT MIN(check_count) FROM user_block_status"
            return all(scalar(conn, least) >= 2 for conn in conns)

        wait_for(checked_twice, 30, "every row of both shards checked twice")
        time.sleep(2)
        late = "SELECT COUNT(*) FROM user_block_status WHERE next_check_at < NOW(3) - INTERVAL 2 SECOND"
        assert [scalar(conn, late) for conn in conns] == [0, 0]
        status = fresh_status(settings, env)
        assert set(status["workloads"]) == {"shard0", "shard1"}, status
    finally:
        second.stop()
