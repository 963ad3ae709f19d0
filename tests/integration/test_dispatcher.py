"""The dispatcher against real MariaDB and Redis: what it pushes, and what it costs."""

from __future__ import annotations

import time

import pytest
import redis

from bench.pollcost import handler_reads, status_overhead
from recheck.dispatcher.dispatcher import Dispatcher
from recheck.shared.core.entries import datetime_to_ms, parse_entries
from recheck.shared.mysql.db import Database
from recheck.shared.redis.keys import Keys
from tests.support.helpers import make_dispatcher, query, scalar, seed_rows, take_lease


def queued(rds, settings) -> list[bytes]:
    return rds.lrange(Keys(settings.deployment.key_prefix).queue, 0, -1)


def finish_between_read_and_push(dispatcher: Dispatcher, lane, held: list[bytes]) -> None:
    """The dispatcher's next page read is followed, before its push, by a worker's `lane` writing
    back and acknowledging the entries it `held` (once): the race a guarded pass must survive."""
    real_query = dispatcher.pusher.rows.db.query

    def read_then_worker_finishes(*args, **kwargs):
        rows = real_query(*args, **kwargs)
        if held:
            lane.batch.process(held)  # written and acknowledged between the read and the push
            held.clear()
        return rows

    dispatcher.pusher.rows.db.query = read_then_worker_finishes


def drain_polls(dispatcher: Dispatcher, limit: int = 1000) -> None:
    """Poll until a poll asks to wait (caught up or at high water)."""
    for _ in range(limit):
        if dispatcher.poll() > 0:
            return
    raise AssertionError("dispatcher never caught up")


def test_pushes_only_due_rows_with_their_exact_due_time(settings, sql, rds):
    query(sql, "INSERT INTO user_block_status (user_id, next_check_at) VALUES "
               "(1, NOW(3) - INTERVAL 5 SECOND), (2, NOW(3)), (3, NOW(3) + INTERVAL 1 HOUR)")  # fmt: skip
    drain_polls(make_dispatcher(settings))
    items, malformed = parse_entries(queued(rds, settings))
    assert not malformed
    assert [item.id for item in items] == [1, 2]  # oldest due first; row 3 is not due
    for item in items:
        due = scalar(sql, "SELECT next_check_at FROM user_block_status WHERE user_id = %s", (item.id,))
        assert item.due_ms == datetime_to_ms(due)
    assert int(rds.hget(Keys(settings.deployment.key_prefix).inflight, "1")) == items[0].due_ms


def test_an_id_is_queued_at_most_once_even_with_two_dispatchers(settings, rds):
    seed_rows(settings, 5000, due_now=True)
    first, second = make_dispatcher(settings), make_dispatcher(settings)
    for _ in range(20):
        first.poll()
        second.poll()
        first.rewind()  # reread from the oldest due row, as after a restart or a sweep
    entries = queued(rds, settings)
    ids = [item.id for item in parse_entries(entries)[0]]
    assert len(ids) == 5000
    assert len(set(ids)) == 5000
    assert rds.hlen(Keys(settings.deployment.key_prefix).inflight) == 5000


def test_backpressure_stops_at_the_high_water_mark(make_settings, rds):
    settings = make_settings(high_water=300, dispatch_batch=128)
    seed_rows(settings, 1000, due_now=True)
    dispatcher = make_dispatcher(settings)
    drain_polls(dispatcher)
    assert len(queued(rds, settings)) == 300
    rds.ltrim(Keys(settings.deployment.key_prefix).queue, 300, -1)  # a worker takes everything
    drain_polls(dispatcher)
    assert len(queued(rds, settings)) == 300  # refilled to the mark, no further


def test_due_decisions_use_the_database_clock_not_the_host_clock(settings, sql, rds, monkeypatch):
    query(
        sql, "INSERT INTO user_block_status (user_id, next_check_at) VALUES (1, NOW(3) + INTERVAL 30 MINUTE)"
    )
    real_time = time.time
    monkeypatch.setattr(time, "time", lambda: real_time() + 3600)  # this host's clock is an hour fast
    drain_polls(make_dispatcher(settings))
    assert queued(rds, settings) == []


def test_redis_losing_its_data_makes_the_dispatcher_reread_from_the_oldest_row(settings, rds):
    seed_rows(settings, 200, due_now=True)
    dispatcher = make_dispatcher(settings)
    drain_polls(dispatcher)
    assert len(queued(rds, settings)) == 200
    rds.flushall()  # a Redis restart without persistence
    take_lease(settings)  # the leader's next heartbeat takes the lease again
    query_new_row = Database(settings)
    query_new_row.execute("INSERT INTO user_block_status (user_id, next_check_at) VALUES (1000, NOW(3))")
    drain_polls(dispatcher)  # the next push notices the missing epoch key and rewinds
    drain_polls(dispatcher)
    assert len(queued(rds, settings)) == 201


@pytest.mark.parametrize("due_now", [True, False], ids=["one-shared-due-time", "spread-due-times"])
def test_a_poll_reads_o_batch_rows_on_a_million_row_table(make_settings, rds, due_now):
    settings = make_settings(dispatch_batch=1000, high_water=10_000_000, interval=1.0)
    seed_rows(settings, 1_000_000, due_now=due_now)
    if not due_now:
        time.sleep(1.1)  # let the whole spread interval become due
    dispatcher = make_dispatcher(settings)
    db = dispatcher.pusher.rows.db
    overhead = status_overhead(db)
    costs = []
    for page in range(60):
        before = handler_reads(db)
        dispatcher.poll()
        after = handler_reads(db)
        costs.append(tuple(a - b - o for a, b, o in zip(after, before, overhead, strict=True)))
        if page == 30:
            rds.delete(Keys(settings.deployment.key_prefix).queue)  # keep Redis small; cost is about MySQL
    # 60 pages deep into 1,000,000 rows, each poll reads one page from the index, and the page
    # once more from the temporary table GROUP_CONCAT reads it back from: O(page), not O(table).
    assert max(index for index, _ in costs) <= 1000 + 2, costs
    assert max(other for _, other in costs) <= 1000 + 2, costs
    assert dispatcher.dispatched == 60_000


def test_after_a_rewind_a_row_finished_between_read_and_push_is_not_queued_again(
    make_worker, settings, sql, rds
):
    from tests.support import checks

    seed_rows(settings, 3, due_now=True)
    dispatcher = make_dispatcher(settings)
    drain_polls(dispatcher)
    worker = make_worker(settings, checks.ok)
    held = worker.lane(settings.name).intake.take(500)  # all three in flight
    dispatcher.rewind()  # e.g. a new leader: it meets the in-flight rows again
    finish_between_read_and_push(dispatcher, worker.lane(settings.name), held)
    drain_polls(dispatcher)
    assert rds.llen(Keys(settings.deployment.key_prefix).queue) == 0
    assert not rds.exists(Keys(settings.deployment.key_prefix).dispatch_guard)  # caught up: guard ended


def test_a_push_whose_reply_was_lost_then_a_row_finished_between_reread_and_push_is_not_queued_again(
    make_worker, settings, sql, rds
):
    """A push that raised may have gone through (the script ran and only its reply was lost, or
    on a Redis Cluster some partitions' scripts ran before another's slot was moving): the page
    read again next is in flight, so reading it again needs the guard (seen on a cluster while a
    slot moved: 5-11 rows checked twice)."""
    from tests.support import checks

    seed_rows(settings, 3, due_now=True)
    dispatcher = make_dispatcher(settings)
    store = dispatcher.pusher.store
    real_push = store.push

    def pushed_but_reply_lost(*args, **kwargs):
        real_push(*args, **kwargs)
        store.push = real_push
        raise redis.exceptions.ConnectionError("Connection lost (the reply never came)")

    store.push = pushed_but_reply_lost
    with pytest.raises(redis.exceptions.ConnectionError):
        dispatcher.poll()
    worker = make_worker(settings, checks.ok)
    held = worker.lane(settings.name).intake.take(500)  # all three in flight
    assert len(held) == 3
    finish_between_read_and_push(dispatcher, worker.lane(settings.name), held)
    drain_polls(dispatcher)  # the service loop's retry after the outage
    assert rds.llen(Keys(settings.deployment.key_prefix).queue) == 0
    assert scalar(sql, "SELECT SUM(check_count) FROM user_block_status") == 3


def test_a_cold_start_with_nothing_in_flight_records_no_tombstones(make_worker, settings, rds):
    from tests.support import checks

    seed_rows(settings, 1000, due_now=True)
    dispatcher = make_dispatcher(settings)
    dispatcher.poll()  # first page while nothing was in flight: no guard
    keys = Keys(settings.deployment.key_prefix)
    assert not rds.exists(keys.dispatch_guard)
    worker = make_worker(settings, checks.ok)
    worker.lane(settings.name).batch.process(worker.lane(settings.name).intake.take(500))
    assert not rds.keys(keys.completed + ":*")
