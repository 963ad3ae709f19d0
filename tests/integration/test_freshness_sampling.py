"""Freshness samples cost MySQL O(cap) whatever the backlog, and one serves the whole deployment.

Before: every sampler (each dispatcher's monitor, `recheck run`'s live line, `recheck watch`)
counted due rows three times a second, each up to 100,000 index entries: while a backlog existed
MySQL read up to 600,000 entries a second just to say how far behind it was.
"""

from __future__ import annotations

import json

from bench.pollcost import handler_reads, status_overhead
from recheck.shared.mysql.db import Database
from recheck.shared.mysql.rows import Rows
from recheck.shared.views.status import OVERDUE_DETAIL, SAMPLED_COUNT_CAP, SLOW_EVERY, Sampler, freshness
from tests.support.clock import ManualClock
from tests.support.helpers import TEST_LEADER, dispatch_all, make_store, query, round_trips, scalar, seed_rows
from tests.support.servers import RedisCluster


def spread_due_times(sql, settings) -> None:
    """Row i due (i mod 7) seconds ago, minus a little: 0..6 s overdue, all due now."""
    table, due = settings.table, settings.due_column
    query(sql, f"UPDATE {table} SET {due} = NOW(3) - INTERVAL ({settings.id_column} MOD 7) SECOND "
               "- INTERVAL 50000 MICROSECOND")  # fmt: skip


def exact(sql, settings, lateness_s: float) -> int:
    table, due = settings.table, settings.due_column
    statement = f"SELECT COUNT(*) FROM {table} WHERE {due} <= NOW(3) - INTERVAL %s MICROSECOND"
    return scalar(sql, statement, (round(lateness_s * 1e6),))


def test_one_pass_counts_are_exact_under_the_cap_and_the_cap_above(make_settings, sql):
    settings = make_settings(interval=3.0)
    seed_rows(settings, 700)
    spread_due_times(sql, settings)
    db = Database(settings)
    rows = Rows(settings, db)
    under = freshness(rows, cap=1_000)
    assert under.due_now == exact(sql, settings, 0.0) == 700
    assert under.overdue_1s == exact(sql, settings, 1.0) == 600
    assert 6.0 < under.oldest_lateness_s < 8.0
    # The oldest overdue rows come one by one (status tells waiting rows from rows in flight,
    # and judges each by its own interval): here 400 of the 600 are past their 3 s interval.
    late = [late_us for _, late_us, every_us in under.overdue_detail if late_us > every_us]
    assert len(under.overdue_detail) == 600 and len(late) == exact(sql, settings, 3.0) == 400
    # Above the cap each count is the cap: the oldest 350 entries are all 3 s or more overdue.
    over = freshness(rows, cap=350)
    assert (over.due_now, over.overdue_1s) == (350, 350)
    db.close()


def test_a_sample_reads_o_cap_index_entries_and_one_serves_every_sampler(settings, sql):
    backlog = 3 * SAMPLED_COUNT_CAP
    seed_rows(settings, backlog)
    spread_due_times(sql, settings)  # 6/7 of them overdue by more than 1 s
    store = make_store(settings)
    first_db, second_db = Database(settings), Database(settings)
    first, second = Sampler(settings, first_db, store), Sampler(settings, second_db, store)
    for sampler in (first, second):
        sampler.sample()  # the first sample also takes the slow counts (rows, failing): not typical
    store.client.delete(store.keys.freshness)

    def index_reads(db: Database, sampler: Sampler) -> int:
        overhead = status_overhead(db)[0]
        before = handler_reads(db)[0]
        facts = sampler.sample()
        assert facts.overdue_waiting == SAMPLED_COUNT_CAP and facts.count_cap == SAMPLED_COUNT_CAP
        return handler_reads(db)[0] - before - overhead

    taken = index_reads(first_db, first)
    # One pass over at most cap + 1 entries of the due index, the oldest OVERDUE_DETAIL of them
    # once more (status tells waiting rows from rows in flight), a probe for the oldest row and
    # the quarantine count; the old three counts read 3 x min(backlog, 100,000) = 90,000 here.
    assert SAMPLED_COUNT_CAP + OVERDUE_DETAIL <= taken <= SAMPLED_COUNT_CAP + OVERDUE_DETAIL + 20, taken
    # A second sampler within the second reads the shared sample, not the due index.
    assert index_reads(second_db, second) <= 20
    for db in (first_db, second_db):
        db.close()


def test_a_sample_costs_a_few_round_trips_whatever_it_shows(make_settings, monkeypatch):
    """A dispatcher's monitor samples every workload again and again, at rest too (every 15 s):
    on an idle deployment its round trips were the largest part of the dispatcher's wake-ups
    after the probe. Each round trip wakes a thread, which on a VM costs far more than the bytes.
    One pipeline and one MGET to Redis, two statements to MySQL (one when the deployment's
    freshness sample is shared), however many facts the sample shows; a one-shot workload's
    counts come in the same statement."""
    settings = make_settings(once=True, max_attempts=3)
    seed_rows(settings, 50)
    store = make_store(settings)
    k = store.keys
    store.client.sadd(k.workers, "w1", "w2")  # live processes: their heartbeats are read too
    store.client.sadd(k.dispatchers, "d1")
    for key, member in ((k.heartbeat("w1"), "w1"), (k.heartbeat("w2"), "w2")):
        store.client.set(key, json.dumps({"id": member}))
    store.client.set(k.dispatcher_heartbeat("d1"), json.dumps({"id": "d1"}))
    db = Database(settings)
    clock = ManualClock()
    sampler = Sampler(settings, db, store, clock=clock)
    sampler.sample()  # the first also takes the slow counts (rows, failing; every 30 s)
    store.client.delete(store.keys.freshness)  # the next sample takes the freshness pass itself
    sent = round_trips(monkeypatch)
    facts = sampler.sample()
    assert facts.one_shot is not None and facts.one_shot.pending == 50
    assert (facts.live_workers, facts.live_dispatchers) == (2, 1)
    assert sent() == {"mysql": 2, "redis": 3}, sent()  # the third: the freshness shared (SET)
    sampler.sample()  # within SHARE_MS: the shared freshness is read with the rest
    assert sent() == {"mysql": 3, "redis": 5}, sent()
    # Every 30 s the counts that scan the table: the rows, due ahead and failing in one more
    # statement; no failing row, so no list of them (four statements before).
    clock.now += SLOW_EVERY
    facts = sampler.sample()
    assert (facts.rows, facts.failing_rows, facts.due_ahead_unchecked, facts.failing) == (50, 0, 0, [])
    assert sent() == {"mysql": 5, "redis": 7}, sent()
    db.execute("UPDATE user_block_status SET fail_count = 2, last_error = 'boom' WHERE user_id = 7")
    clock.now += SLOW_EVERY
    facts = sampler.sample()
    assert facts.failing_rows == 1 and [row["id"] for row in facts.failing] == ["7"]
    assert sent()["mysql"] == 5 + 1 + 3  # the update; then the counts, the slow counts, the list
    db.close()


def test_a_sample_on_a_redis_cluster_reads_every_partition_in_its_two_round_trips(make_settings, tmp_path):
    """Store.status_reads sends one pipeline across the partitions' slots (a cluster client
    splits it by node) and one MGET of heartbeats, all in the first partition's slot."""
    cluster = RedisCluster(tmp_path / "cluster", masters=3, replicas=0)
    cluster.start()
    try:
        settings = make_settings(partitions=4, redis_url=f"redis://127.0.0.1:{cluster.nodes[0].port}/0")
        seed_rows(settings, 20, due_now=True)
        dispatch_all(settings)
        store = make_store(settings)
        k = store.keys
        store.client.sadd(k.workers, "w1")
        store.client.set(k.heartbeat("w1"), json.dumps({"id": "w1"}))
        db = Database(settings)
        facts = Sampler(settings, db, store).sample()
        assert facts.queue_depth == 20 and facts.due_now == 20  # the four partitions' queues summed
        assert facts.live_workers == 1 and facts.leader == TEST_LEADER
        db.close()
    finally:
        cluster.kill()
