"""Priority within a workload (issue 35, item 1): rows whose priority_column is 1 are read by a
pass of their own into a list of their own and taken first, but for priority_share of every
take, which still goes to the rest (docs/priorities.md).

The Redis side (which list a page goes to, the share a take keeps for the rest) is tested on the
scripts themselves; the promise, on real worker processes whose check stamps each call (the
provider's view): under a rate limit at a third of what the table needs, priority rows keep
their rhythm while the rest fall behind, and with capacity to spare both are on time. On the
code before, every row waited in one queue: premium rows due every 3 s were checked every 11 s
or so, like the rest.
"""

from __future__ import annotations

import itertools
import time
from collections import defaultdict
from pathlib import Path

import pytest

from recheck.dispatcher.dispatcher import Dispatcher
from recheck.shared.mysql.db import Database
from recheck.shared.mysql.schema import SchemaProblem, inspect_table, require_table
from recheck.shared.redis.store import Counts
from tests.support.helpers import TEST_LEADER, make_store, recheck, run_sql, seed_rows, take_lease
from tests.support.servers import wait_for

STAMPED = {"RECHECK_CHECK": "tests.support.checks:stamped"}


def with_priority(make_settings, premium_every: int = 10, **overrides):
    """The test table with a `premium` column (1 on every `premium_every`-th row) and its index,
    and a workload that gives it priority."""
    plain = make_settings(**overrides)
    run_sql(
        plain,
        f"ALTER TABLE {plain.table} ADD COLUMN premium TINYINT(1) NOT NULL DEFAULT 0, "
        f"ADD KEY premium_due (premium, {plain.due_column}, {plain.id_column})",
    )
    return plain.model_copy(update={"priority_column": "premium"}), premium_every


def mark_premium(settings, every: int) -> None:
    run_sql(
        settings, f"UPDATE {settings.table} SET premium = 1 WHERE {settings.id_column} % {int(every)} = 0"
    )


def entry(key: bytes) -> bytes:
    """A queue entry of `key`, due at 1 s after 1970 (the scripts never read the due part)."""
    return key + b":1000"


def calls_by_id(folder: Path) -> dict[int, list[float]]:
    """When each id's checks started, over every worker process."""
    calls: dict[int, list[float]] = defaultdict(list)
    for file in folder.glob("*.stamps"):
        for line in file.read_text().splitlines():
            at, key = line.split()
            calls[int(key)].append(float(at))
    return {key: sorted(times) for key, times in calls.items()}


def longest_wait(times: list[float], start: float, end: float) -> float:
    """The longest time within [start, end] that a row went without a check starting."""
    inside = [t for t in times if start <= t <= end]
    marks = [start, *inside, end]
    return max(b - a for a, b in itertools.pairwise(marks))


# -- the scripts ----------------------------------------------------------------------------------
def test_a_priority_page_waits_in_its_own_list_only_while_the_other_list_has_work(make_settings):
    settings, _ = with_priority(make_settings)
    store = make_store(settings)
    keys = store.keys
    take_lease(settings)
    # Idle workers block on the main list: a priority page finding it empty goes there.
    assert store.push(TEST_LEADER, [entry(b"1")], priority=True).pushed == 1
    assert (store.client.llen(keys.queue), store.client.llen(keys.priority_queue)) == (1, 0)
    # Behind other work it waits in its own list, taken first.
    store.push(TEST_LEADER, [entry(str(i).encode()) for i in range(10, 20)])
    assert store.push(TEST_LEADER, [entry(b"2")], priority=True).depth == 1
    taken = store.take("w1", 3).entries
    assert taken[0] == b"2:1000", taken
    # Dedup holds across the two lists: an id in flight in one is not pushed to the other.
    assert store.push(TEST_LEADER, [entry(b"15")], priority=True).pushed == 0


def test_a_priority_page_or_a_now_goes_where_it_is_taken_first_and_given_back_ids_too(make_settings):
    settings, _ = with_priority(make_settings)
    store = make_store(settings)
    keys = store.keys
    take_lease(settings)
    store.push(TEST_LEADER, [entry(b"1")], priority=True)  # both lists empty: the main list
    store.push(TEST_LEADER, [entry(b"2")])
    assert store.take("w1", 2).entries == [b"1:1000", b"2:1000"]
    store.client.rpush(keys.priority_queue, b"3:1000")  # a priority backlog, nothing else waiting
    store.client.hset(keys.inflight, b"3", b"1000")
    store.push(TEST_LEADER, [entry(b"4")], priority=True)  # behind the backlog, in its own list
    store.push(TEST_LEADER, [entry(b"5")], head=True)  # `now`: the head of the list taken first
    assert store.client.lrange(keys.priority_queue, 0, -1) == [b"5:1000", b"3:1000", b"4:1000"]
    store.push(TEST_LEADER, [entry(b"6")])
    taken = store.take("w2", 1).entries
    assert taken == [b"5:1000"]
    # Handed back unchecked (a shutdown): to the head of the list taken first.
    store.acknowledge("w2", [], taken, Counts(), whole=True)
    assert store.client.lindex(keys.priority_queue, 0) == b"5:1000"


def test_a_workload_without_a_priority_column_takes_what_the_priority_list_held_once_settled(make_settings):
    """priority_column removed: the new leader moves the priority list's entries to the head of
    the queue (Store.settle, settle.lua); nothing is stranded (tests/scripts/test_settle.py)."""
    settings = make_settings()
    store = make_store(settings)
    store.client.rpush(store.keys.priority_queue, b"7:1000")
    store.client.hset(store.keys.inflight, b"7", b"1000")
    store.client.rpush(store.keys.queue, b"8:1000")
    take_lease(settings)
    assert store.settle(TEST_LEADER).moved == 1
    assert store.take("w1", 5).entries == [b"7:1000", b"8:1000"]
    assert store.queue_depth() == 0


@pytest.mark.parametrize("take", [1, 10, 100])
def test_while_both_lists_wait_the_rest_gets_its_share_of_takes_of_any_size(make_settings, take):
    settings, _ = with_priority(make_settings, priority_share=0.1)
    store = make_store(settings)
    take_lease(settings)
    store.push(TEST_LEADER, [entry(str(i).encode()) for i in range(1, 3001)])  # the rest
    store.push(TEST_LEADER, [entry(str(i).encode()) for i in range(5001, 8001)], priority=True)
    got = [entry for _ in range(2000 // take) for entry in store.take("w1", take).entries]
    rest = sum(1 for entry in got if int(entry.split(b":")[0]) < 5000)
    assert len(got) == 2000
    assert rest == 200, rest  # a tenth exactly, carried over between takes of one
    # Once the priority list is empty, takes are the rest's alone; and the other way round.
    store.client.delete(store.keys.priority_queue)
    assert all(int(e.split(b":")[0]) < 5000 for e in store.take("w1", 50).entries)


def test_strict_priority_when_the_share_is_zero(make_settings):
    settings, _ = with_priority(make_settings, priority_share=0)
    store = make_store(settings)
    take_lease(settings)
    store.push(TEST_LEADER, [entry(str(i).encode()) for i in range(1, 101)])
    store.push(TEST_LEADER, [entry(str(i).encode()) for i in range(5001, 5051)], priority=True)
    first = store.take("w1", 60).entries
    assert [int(e.split(b":")[0]) for e in first[:50]] == list(range(5001, 5051))
    assert len(first) == 60  # the priority list's shortfall filled from the rest


def test_orphan_collection_and_inspect_see_the_priority_list(make_settings):
    settings, _ = with_priority(make_settings)
    seed_rows(settings, 20, due_now=True)
    mark_premium(settings, 1)
    store = make_store(settings)
    take_lease(settings)
    store.push(TEST_LEADER, [entry(b"999")])  # the main list is busy
    store.push(TEST_LEADER, [entry(b"5")], priority=True)
    candidates = [b"5", b"1000"]
    assert store.release_orphans(0, candidates, []) == []  # queued in the priority list: not an orphan
    out = recheck("inspect", "5", settings=settings).stdout
    assert "priority list" in out, out


def test_init_db_proposes_the_priority_index_and_the_dispatcher_refuses_without_it(make_settings):
    plain = make_settings()
    run_sql(
        plain,
        f"ALTER TABLE {plain.table} ADD COLUMN premium TINYINT(1) NOT NULL DEFAULT 0",
        f"ALTER TABLE {plain.table} ADD COLUMN tier VARCHAR(10) NULL",
    )
    db = Database(plain)
    try:
        settings = plain.model_copy(update={"priority_column": "premium"})
        plan = inspect_table(settings, db)
        assert any(
            "ADD KEY `recheck_priority` (`premium`, `next_check_at`, `user_id`)" in c for c in plan.changes
        )
        with pytest.raises(SchemaProblem):
            require_table(settings, db)
        wrong = inspect_table(plain.model_copy(update={"priority_column": "tier"}), db)
        assert any("must be an integer" in problem for problem in wrong.fatal), wrong.fatal
        missing = inspect_table(plain.model_copy(update={"priority_column": "nope"}), db)
        assert any("has no priority column 'nope'" in problem for problem in missing.fatal)
        interval = inspect_table(plain.model_copy(update={"interval_column": "tier"}), db)  # the same rules
        assert "interval column 'tier' is varchar(10); it must hold seconds as a number" in interval.fatal
    finally:
        db.close()


def drain(passes) -> None:
    """Poll every pass until none has a full page left."""
    while min(one.poll() for one in passes) == 0:
        pass


@pytest.mark.parametrize(
    "premium_before", [True, False], ids=["both passes under way", "priority pass at start"]
)
def test_each_row_is_read_by_one_pass_and_both_reread_everything_after_redis_loses_its_data(
    make_settings, premium_before
):
    """Whichever pass notices the loss (the priority pass, polled first) rewinds the other too,
    even when it had read nothing yet itself (premium rows are rare)."""
    settings, every = with_priority(make_settings)
    seed_rows(settings, 40, due_now=True)
    if premium_before:
        mark_premium(settings, every)  # ids 10, 20, 30, 40
    take_lease(settings)
    store, db = make_store(settings), Database(settings)
    try:
        passes = Dispatcher.passes(settings, db, store, TEST_LEADER)
        for one in passes:
            one.pusher.learn_keys()
        drain(passes)
        first, rest = passes
        premium = 4 if premium_before else 0
        assert (first.dispatched, rest.dispatched) == (premium, 40 - premium)  # each row read by one pass
        store.client.flushall()  # Redis loses its data
        take_lease(settings)
        seed_rows(settings, 10, due_now=True)  # ids 41..50, 50 a premium row: a push notices the loss
        run_sql(settings, f"UPDATE {settings.table} SET premium = 1 WHERE {settings.id_column} = 50")
        drain(passes)
        drain(passes)  # the rewound passes read everything again
        queued = {e.split(b":")[0] for e in store.client.lrange(store.keys.queue, 0, -1)}
        queued |= {e.split(b":")[0] for e in store.client.lrange(store.keys.priority_queue, 0, -1)}
        assert queued == {str(i).encode() for i in range(1, 51)}
    finally:
        db.close()


# -- the promise, on real processes ------------------------------------------------------------------
@pytest.mark.serial  # timing: serial layer (make test)
@pytest.mark.parametrize("partitions", [1, 3], ids=["1 partition", "3 partitions"])
def test_under_a_third_of_the_rate_needed_premium_rows_keep_their_rhythm_and_the_rest_fall_behind(
    make_settings, procs, tmp_path, partitions
):
    """With partitions, each partition keeps its own two lists and share (each take is served by
    one partition first): the promise holds over the workload all the same."""
    interval, rows = 1.0, 3000
    settings, every = with_priority(
        make_settings, interval=interval, rate_limit=rows / interval / 3, partitions=partitions
    )
    seed_rows(settings, rows, due_now=True)
    mark_premium(settings, every)  # 300 premium rows need 300 checks/s of the limit's 1,000
    record = tmp_path / "stamps"
    record.mkdir()
    procs.start("dispatcher", settings)
    for _ in range(3):
        procs.start("worker", settings, env={**STAMPED, "TEST_CHECK_RECORD": str(record)})
    wait_for(lambda: len(calls_by_id(record)) >= 400, 20, "the first checks")
    start = time.time()
    time.sleep(5 * interval)  # a sampling period: the rest need 3.9 s for a round at 700/s
    status = recheck("status", settings=settings).stdout
    end = time.time()
    calls = calls_by_id(record)
    premium = {key: times for key, times in calls.items() if key % every == 0}
    rest = {key: times for key, times in calls.items() if key % every}
    worst_premium = max(longest_wait(times, start, end) for times in premium.values())
    # How long the rest go without a check: every rest row, whether checked in the window or not.
    rest_waits = sorted(
        longest_wait(rest.get(key, []), start, end) for key in range(1, rows + 1) if key % every
    )
    closest = min(b - a for times in calls.values() for a, b in itertools.pairwise(times))
    print(f"priorities under overload: premium rows waited at most {worst_premium:.2f} s (interval "
          f"{interval:g} s); the rest's median longest wait {rest_waits[len(rest_waits) // 2]:.1f} s; "
          f"closest two checks of one row {closest:.2f} s")  # fmt: skip
    assert len(premium) == rows // every  # every premium row was checked
    assert worst_premium <= 2 * interval, worst_premium
    assert rest_waits[len(rest_waits) // 2] > 2 * interval  # the rest fall behind
    assert closest >= interval * (1 - settings.jitter) - 0.3, closest  # no row checked twice at once
    assert "priority" in status, status


@pytest.mark.serial  # timing: serial layer (make test)
def test_with_capacity_to_spare_both_classes_are_on_time(make_settings, procs, tmp_path):
    interval, rows = 2.0, 2000
    settings, every = with_priority(make_settings, interval=interval)
    seed_rows(settings, rows, due_now=True)
    mark_premium(settings, every)
    record = tmp_path / "stamps"
    record.mkdir()
    procs.start("dispatcher", settings)
    procs.start("worker", settings, env={**STAMPED, "TEST_CHECK_RECORD": str(record)})
    wait_for(lambda: len(calls_by_id(record)) >= rows, 20, "every row checked once")
    start = time.time()
    time.sleep(2.5 * interval)  # a sampling period: every row's wait is seen whole at least twice
    end = time.time()
    calls = calls_by_id(record)
    worst = {
        name: max(
            longest_wait(calls[key], start, end) for key in range(1, rows + 1) if (key % every == 0) == wanted
        )
        for name, wanted in (("premium", True), ("rest", False))
    }
    print(f"priorities with capacity to spare: longest wait premium {worst['premium']:.2f} s, "
          f"rest {worst['rest']:.2f} s (interval {interval:g} s)")  # fmt: skip
    assert worst["premium"] <= interval + 1.0, worst
    assert worst["rest"] <= interval + 1.0, worst


@pytest.mark.serial  # timing: serial layer (make test)
def test_a_queue_tables_priority_jobs_jump_a_backlog(make_settings, procs, tmp_path):
    """One-shot rows (a job table): jobs inserted with priority behind a backlog of 3,000 are done
    within a couple of seconds, while the backlog still waits; each job is done once."""
    settings, _ = with_priority(make_settings, once=True, rate_limit=400)
    seed_rows(settings, 3000, due_now=True)  # 7.5 s of work at the limit
    record = tmp_path / "stamps"
    record.mkdir()
    procs.start("dispatcher", settings)
    procs.start("worker", settings, env={**STAMPED, "TEST_CHECK_RECORD": str(record)})
    wait_for(lambda: len(calls_by_id(record)) >= 400, 20, "the backlog under way")
    inserted = time.time()
    urgent = range(10_001, 10_101)
    run_sql(settings, f"INSERT INTO {settings.table} ({settings.id_column}, premium) VALUES "
                      + ", ".join(f"({key}, 1)" for key in urgent))  # fmt: skip
    wait_for(lambda: all(key in calls_by_id(record) for key in urgent), 10, "the priority jobs done")
    calls = calls_by_id(record)
    slowest = max(calls[key][0] for key in urgent) - inserted
    backlog_left = sum(1 for key in range(1, 3001) if key not in calls)
    print(f"priority jobs behind a backlog: all 100 started within {slowest:.2f} s of their insert; "
          f"{backlog_left} of the 3,000 ahead of them still waiting then")  # fmt: skip
    assert slowest <= 2.0, slowest
    assert backlog_left >= 1000, backlog_left  # they jumped it: it was still there
    wait_for(lambda: len(calls_by_id(record)) >= 3100, 30, "every job done")
    assert all(len(times) == 1 for times in calls_by_id(record).values())  # each job once


def passes_of(settings, store, db) -> list:
    take_lease(settings)
    passes = Dispatcher.passes(settings, db, store, TEST_LEADER)
    for one in passes:
        one.pusher.learn_keys()
    return passes


def test_each_list_holds_at_most_high_water_from_a_cold_start(make_settings):
    """Issue 45, item 10: the first priority page lands in the rest's list while both are empty
    (idle workers wait on that one); the rest's pass then pushed a whole high water behind it."""
    settings, every = with_priority(make_settings, high_water=1000, dispatch_batch=2000)
    seed_rows(settings, 5000, due_now=True)
    mark_premium(settings, every)  # 500 premium rows
    store, db = make_store(settings), Database(settings)
    try:
        drain(passes_of(settings, store, db))
        rest, first = store.client.llen(store.keys.queue), store.client.llen(store.keys.priority_queue)
        assert rest <= 1000 and first <= 1000, (rest, first)
        assert rest + first >= 1000  # and the lists are filled
    finally:
        db.close()


def test_now_jumps_both_lists_at_high_water(make_settings):
    """Issue 45, item 6: with both lists at high water, `now` of a row due in an hour waited:
    the asked job sized its room from both lists' depth against one list's high water."""
    from recheck import Client
    from tests.support.helpers import make_pusher

    settings, _ = with_priority(make_settings, high_water=1000)
    seed_rows(settings, 5000, due_now=True)
    mark_premium(settings, 2)  # half the rows: both lists fill up
    run_sql(settings, f"UPDATE {settings.table} SET {settings.due_column} = NOW(3) + INTERVAL 1 HOUR "
                      f"WHERE {settings.id_column} = 4999")  # fmt: skip
    store, db = make_store(settings), Database(settings)
    try:
        drain(passes_of(settings, store, db))
        assert store.queue_depth() >= 2000
        client = Client(settings=settings)
        assert client.now([4999]).done == [4999]
        assert make_pusher(settings).push_asked() == 1
        head = store.client.lindex(store.keys.priority_queue, 0)
        assert head.split(b":")[0] == b"4999"
        client.close()
    finally:
        db.close()
