"""Groups (issue 35, item 2): rows grouped by a group_column are served in turn, each group held
to group_rate_limit and group_max_in_flight over every worker (docs/groups.md).

The Redis side (the ring, a group's tokens and room, what leaves a worker giving room back) is
tested on the scripts themselves, against a real Redis; the promise on real worker processes
whose check stamps each call (the provider's view): one group with 20,000 due rows beside 200
groups of 10, a per-group rate of 5/s: no group above 5/s plus one grant in any second, and the
small groups checked within their interval + 2 s.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from recheck.dispatcher.dispatcher import START
from recheck.dispatcher.reconciler import GroupLimitsCopier
from recheck.shared.mysql.db import Database
from recheck.shared.mysql.schema import inspect_table
from recheck.shared.redis.keys import Keys
from recheck.shared.redis.store import Counts, group_name
from tests.support.faultproxy import FaultProxy
from tests.support.helpers import (
    TEST_LEADER,
    counted_rate,
    make_pusher,
    make_store,
    recheck,
    run_sql,
    seed_rows,
    take_lease,
)
from tests.support.processes import SCHEDULING_SLACK_S
from tests.support.servers import RedisCluster, wait_for

STAMPED = {"RECHECK_CHECK": "tests.support.checks:stamped"}


def grouped(make_settings, limits: dict | None = None, **overrides):
    """The test table with a `tenant` column and a workload grouped by it, with these group
    limits."""
    plain = make_settings(**overrides)
    run_sql(plain, f"ALTER TABLE {plain.table} ADD COLUMN tenant VARCHAR(40) NULL")
    return plain.evolve(group_column="tenant", **(limits or {}))


def entry(key: int, group: str) -> bytes:
    """A grouped queue entry as the due page spells it: "id:due_ms:hex(group)"."""
    return f"{key}:1000:{group.encode().hex().upper()}".encode()


def acme_store(make_settings, rows: int, **limits):
    """A grouped workload's store holding `rows` entries of group "acme" (ids 1..rows), with these
    group limits, and its settings."""
    settings = grouped(make_settings, limits)
    store = make_store(settings)
    take_lease(settings)
    store.push(TEST_LEADER, [entry(i, "acme") for i in range(1, rows + 1)])
    return store, settings


# -- the scripts ----------------------------------------------------------------------------------
def test_groups_are_taken_in_turn_whatever_their_backlog(make_settings):
    settings = grouped(make_settings)
    store = make_store(settings)
    take_lease(settings)
    big = [entry(i, "big") for i in range(1, 1001)]  # pushed first: a FIFO would serve it alone
    small = [entry(i, f"small{i % 10}") for i in range(2001, 2051)]  # 10 groups of 5
    assert store.push(TEST_LEADER, big + small).pushed == 1050
    assert store.queue_depth() == 1050
    taken = store.take("w1", 22).entries
    groups = Counter(b"big" if int(e.split(b":")[0]) <= 1000 else e.split(b":")[0][-1:] for e in taken)
    # 11 groups in the ring: each gives its share (2) of a take of 22, the big one no more.
    assert len(taken) == 22 and set(groups.values()) == {2}, groups
    assert store.queue_depth() == 1050 - 22
    # A take beyond what the small groups hold: they give all they have, the big one the rest.
    taken = store.take("w2", 100).entries
    assert sum(int(e.split(b":")[0]) > 2000 for e in taken) == 30, taken
    assert len(taken) == 100


def test_a_page_goes_to_its_groups_lists_in_order_and_groups_join_the_ring_in_order(make_settings):
    settings = grouped(make_settings)
    store = make_store(settings)
    take_lease(settings)
    page = [entry(1, "a"), entry(2, "b"), entry(3, "a"), entry(4, "c"), entry(5, "b"), entry(6, "a")]
    assert store.push(TEST_LEADER, page).pushed == 6
    ring = [group_name(name) for name in store.client.lrange(store.keys.group_ring, 0, -1)]
    assert ring == ["a", "b", "c"]  # the order of each group's first entry
    lists = {name: store.client.lrange(store.keys.group_list(name.encode().hex().upper().encode()), 0, -1)
             for name in ring}  # fmt: skip
    assert lists == {"a": [b"1:1000", b"3:1000", b"6:1000"], "b": [b"2:1000", b"5:1000"], "c": [b"4:1000"]}
    store.push(TEST_LEADER, [entry(7, "c"), entry(8, "d")])  # c already waits: only d joins
    assert [group_name(n) for n in store.client.lrange(store.keys.group_ring, 0, -1)] == ["a", "b", "c", "d"]
    assert store.client.get(store.keys.groups_waiting) == b"8"


@pytest.mark.serial  # timing: with a burst of 1 a take late by 0.2 s loses a token; serial layer (make test)
def test_a_groups_rate_holds_over_workers_and_its_rows_wait_in_redis(make_settings):
    settings = grouped(make_settings, {"group_rate_limit": 5.0})
    store = make_store(settings)
    take_lease(settings)
    store.push(TEST_LEADER, [entry(i, "acme") for i in range(1, 101)] + [entry(500, "other")])
    first = store.take("w1", 50)
    # One grant per group (burst 1 at 5/s): one acme row and the other group's row.
    assert sorted(int(e.split(b":")[0]) for e in first.entries) == [1, 500]
    held = store.take("w2", 50)  # another worker, at once: acme is asleep until its next token
    assert held.entries == [] and 0 < held.limited <= 0.21 and held.group == "acme", held
    assert store.client.zscore(store.keys.groups_sleeping, b"acme".hex().upper()) is not None
    started = time.monotonic()
    got = 1
    while time.monotonic() - started < 2.0:
        taken = store.take("w3" if got % 2 else "w4", 50)
        got += len(taken.entries)
        time.sleep(max(taken.limited, 0.005))
    # 2 s at 5/s plus the first grant's token: 11, give or take the edges.
    assert 10 <= got <= 12, got
    assert store.queue_depth() == 100 - got


def test_a_groups_in_flight_limit_counts_until_the_ack_and_an_ack_gives_room_back(make_settings):
    store, _ = acme_store(make_settings, 10, group_max_in_flight=2)
    one = store.take("w1", 1).entries
    two = store.take("w2", 10).entries
    assert (len(one), len(two)) == (1, 1)
    nothing = store.take("w3", 10)
    assert nothing.entries == [] and nothing.limited < 0 and nothing.group == "acme"
    assert store.client.sismember(store.keys.groups_full, b"acme".hex().upper())
    store.acknowledge("w1", one, [], Counts(checked=1), whole=True)
    assert store.client.llen(store.keys.wake) == 1  # an idle worker is woken for the room
    assert len(store.take("w3", 10).entries) == 1
    # A late ack of entries no longer held (reclaimed meanwhile) gives nothing back twice.
    store.acknowledge("w1", one, [], Counts(checked=1), whole=True)
    assert store.take("w4", 10).entries == []
    # Given back unchecked (a shutdown): to the head of its group, room given back.
    store.acknowledge("w2", [], two, Counts(), whole=True)
    again = store.take("w4", 10).entries
    assert again == two
    assert int(store.client.hget(store.keys.groups_running, b"acme".hex().upper())) == 2


def test_on_a_redis_cluster_the_scripts_keep_each_groups_limits(make_settings, tmp_path):
    """The groups' lists are not declared to the scripts (there are as many as groups): they
    share the workload's hash tag, so a cluster node runs them in the same slot."""
    cluster = RedisCluster(tmp_path / "cluster", masters=3, replicas=0)
    cluster.start()
    try:
        settings = grouped(
            make_settings,
            {"group_rate_limit": 5.0, "group_max_in_flight": 1},
            redis_url=f"redis://127.0.0.1:{cluster.nodes[0].port}/0",
        )
        store = make_store(settings)
        take_lease(settings)
        store.push(TEST_LEADER, [entry(i, "acme") for i in range(1, 5)] + [entry(9, "other")])
        first = store.take("w1", 10).entries
        assert sorted(first) == [b"1:1000", b"9:1000"], first
        held = store.take("w2", 10)
        assert held.entries == [] and held.group in ("acme", "other"), held
        store.acknowledge("w1", first, [], Counts(checked=2), whole=True)
        # acme's next token is due 0.2 s after the first (5/s): it is taken then, and only it
        assert wait_for(lambda: store.take("w2", 10).entries, 2, "acme's next token") == [b"2:1000"]
        assert store.queue_depth() == 2
        # The orphan job's reads (a pipeline of the groups' lists) and its script on a cluster node.
        inflight = store.partitions[0].inflight
        store.client.hset(inflight, "77", "1000")  # in flight, waiting nowhere
        cursor, flying = store.in_flight_before(0, 2000, 0, 100)
        assert cursor == 0 and sorted(flying[::2]) == [b"2", b"3", b"4", b"77"]  # 1 and 9 were acked
        left = store.not_seen_anywhere(0, flying, ["w1", "w2"])
        assert left == [b"77", b"1000"]
        assert store.release_orphans(0, left, store.worker_ids(0)) == [b"77"]
    finally:
        cluster.kill()


def test_a_dead_workers_entries_keep_their_groups_room_until_their_next_holder_acks(make_settings):
    store, _ = acme_store(make_settings, 3, group_max_in_flight=1)
    held = store.take("dead", 5).entries
    assert len(held) == 1
    store.client.sadd(store.keys.workers, "dead")
    assert store.reclaim(0, "dead", max_reclaims=3, groups=1) == (1, 0)
    # Reclaimed: taken again (alone, as any reclaimed batch) by the next worker, still counted.
    retaken = store.take("w2", 5)
    assert retaken.suspect and retaken.entries == held
    assert store.take("w3", 5).entries == []
    store.acknowledge("w2", held, [], Counts(checked=1), whole=True)
    assert len(store.take("w3", 5).entries) == 1


def test_a_reclaimed_entry_dropped_before_its_retake_gives_its_groups_room_back(make_settings):
    """Paused (or superseded by `now`) while it waited as a reclaimed batch: it never reaches an
    ack, so the take that drops it gives the room back (the group stayed full for good)."""
    store, _ = acme_store(make_settings, 3, group_max_in_flight=1)
    held = store.take("dead", 5).entries
    store.client.sadd(store.keys.workers, "dead")
    store.reclaim(0, "dead", max_reclaims=3, groups=1)
    store.drop([held[0].split(b":")[0]])  # pause the row while its entry waits among the suspects
    # The reclaimed batch is dropped, and its room given back: the same take goes on to acme's next.
    assert store.take("w2", 5).entries == [b"2:1000"]
    assert store.take("w3", 5).entries == []  # and that one holds acme's only room


def test_a_paused_backlog_drains_in_one_take_not_one_entry_a_millisecond(make_settings):
    store, _ = acme_store(make_settings, 2000, group_rate_limit=5.0)
    store.drop([str(i).encode() for i in range(1, 2000)])  # all but the last row paused, queued
    taken = store.take("w1", 10)
    assert taken.entries == [b"2000:1000"], taken
    assert store.queue_depth() == 0


def test_rows_waiting_in_groups_are_taken_after_the_group_column_is_removed(make_settings):
    store, settings = acme_store(make_settings, 5, group_max_in_flight=1)
    assert store.settle(TEST_LEADER).now == "groups"  # (what its leader did first)
    assert len(store.take("w1", 5).entries) == 1
    assert store.take("w2", 5).entries == []  # acme is full: in the full set
    plain = make_store(settings.evolve(group_column="", group_max_in_flight=0))
    assert plain.take("w2", 10).settled == "groups"  # its lists are not settled for it yet
    assert plain.settle(TEST_LEADER).moved == 4  # the new leader's first act (dispatcher/lane.py)
    assert len(plain.take("w2", 10).entries) == 4  # no group limits now: what waited goes


def test_a_queue_left_by_a_plain_dispatcher_is_settled_by_a_grouped_one_and_every_row_checked(
    make_settings, procs, tmp_path
):
    """Issue 46: a take reads its own ordering's lists only. A fifo dispatcher queued every row
    (no worker ran), then the workload got its group column: the new leader releases what the
    plain queue holds before its first push, its pass reads the rows again with their groups."""
    settings = grouped(make_settings)
    seed_rows(settings, 300, due_now=True)
    run_sql(settings, f"UPDATE {settings.table} SET tenant = CONCAT('t', user_id MOD 7)")
    plain = settings.evolve(group_column="")
    first = procs.start("dispatcher", plain)
    store = make_store(plain)
    wait_for(lambda: store.queue_depth() == 300, 20, "the plain dispatcher's pushes")
    first.terminate()
    assert first.wait(15) == 0
    second = procs.start("dispatcher", settings)
    procs.start("worker", settings, env={**STAMPED, "TEST_CHECK_RECORD": str(tmp_path)})
    wait_for(lambda: len(calls_per_group(tmp_path, lambda key: str(key))) == 300, 30, "every row checked")
    log = procs.log_of(second)
    assert "ordering is now groups (the lists were settled for fifo): 0 queued entries moved" in log, log
    assert "300 released and asked for again" in log, log
    assert store.client.get(store.keys.ordering) == b"groups"


def test_a_hundred_thousand_groups_cost_a_take_o_batch(make_settings):
    """Not a timing: a take of 500 from 100,000 groups runs O(500) commands in its script, the
    same count as from 10 groups (Redis counts every command a script runs)."""
    settings = grouped(make_settings, {"group_rate_limit": 1000.0})
    store = make_store(settings)
    take_lease(settings)

    def commands_of_one_take(groups: int) -> int:
        store.client.flushall()
        take_lease(settings)
        rows = [entry(i, f"g{i % groups}") for i in range(100_000)]
        for start in range(0, len(rows), 10_000):
            store.push(TEST_LEADER, rows[start : start + 10_000])
        store.client.config_resetstat()
        assert len(store.take("w1", 500).entries) == 500
        stats = store.client.info("commandstats")
        return sum(v["calls"] for k, v in stats.items() if k not in ("cmdstat_evalsha", "cmdstat_info"))

    few, many = commands_of_one_take(10), commands_of_one_take(100_000)
    print(f"commands in one take of 500: {few:,} from 10 groups, {many:,} from 100,000")
    # Per group visited: its LPOP and an LLEN; the tokens are read and written once per round.
    assert many <= 2 * 500 + 100, (few, many)


def test_a_groups_tokens_are_forgotten_once_they_no_longer_run_ahead(make_settings):
    """The rates hash keeps the groups that wait and those whose tokens still run ahead of now,
    not every group ever seen: a group a take empties is remembered with its time, and takes that
    visit groups delete up to about twice as many such times as they visit groups once passed."""
    settings = grouped(make_settings, {"group_rate_limit": 1000.0})
    store = make_store(settings)
    take_lease(settings)
    rates = store.keys.group_rates
    store.push(TEST_LEADER, [entry(i, f"old{i}") for i in range(1, 2001)])  # 2,000 groups of one
    old = set()
    for _ in range(4):
        assert len(store.take("w1", 500).entries) == 500  # each group's time: 1 ms ahead
        old |= {
            field for field in store.client.hkeys(rates) if field.startswith(b"old".hex().upper().encode())
        }
    assert len(old) >= 500, len(old)  # at least the last take's groups
    assert 0 < store.client.pttl(rates) <= 1100  # a second after the times could all have passed (0.1 s)
    newest = max(int(v) for f, v in store.client.hgetall(rates).items() if not f.startswith(b"~"))

    def redis_now_us() -> int:
        seconds, micros = store.client.time()
        return seconds * 1_000_000 + micros

    wait_for(lambda: redis_now_us() > newest, 2, "every stored time to pass on the Redis clock")
    store.push(TEST_LEADER, [entry(i, f"new{i}") for i in range(10_001, 18_001)])
    takes = 0
    while old & set(store.client.hkeys(rates)) and takes < 16:
        assert len(store.take("w2", 500).entries) == 500
        takes += 1
    assert not old & set(store.client.hkeys(rates)), f"still there after {takes} takes"
    print(f"the old groups' times were gone after {takes} takes of 500")


# -- the dispatcher and the table -----------------------------------------------------------------
def test_the_due_page_carries_each_rows_group_and_init_db_refuses_a_bad_column(make_settings):
    settings = grouped(make_settings)
    seed_rows(settings, 4, due_now=True)
    run_sql(
        settings, f"UPDATE {settings.table} SET tenant = IF(user_id = 1, NULL, IF(user_id = 2, '', 'äcme'))"
    )
    store = make_store(settings)
    take_lease(settings)
    pusher = make_pusher(settings)
    page = pusher.push_page(START, 100)
    assert (page.read, page.pushed) == (4, 4)
    names = {group_name(name) for name in store.client.lrange(store.keys.group_ring, 0, -1)}
    assert names == {"NULL", '""', "äcme"}
    story = recheck("inspect", "4", settings=settings).stdout
    assert "queued in group äcme at position 2 of its 2 (waiting for its turn)" in story, story
    db = Database(settings)
    try:
        assert not inspect_table(settings, db).fatal
        run_sql(settings, f"ALTER TABLE {settings.table} MODIFY COLUMN tenant TEXT NULL")
        problems = inspect_table(settings, db).fatal
    finally:
        db.close()
    assert any("group column 'tenant'" in p for p in problems), problems


def test_groups_refuse_what_they_cannot_keep(make_settings):
    settings = make_settings()
    with pytest.raises(ValueError, match="group_column"):
        settings.evolve(group_rate_limit=5.0)
    with pytest.raises(ValueError, match="one partition"):
        settings.evolve(group_column="tenant", partitions=2)


def test_the_group_limits_table_is_made_by_init_db_and_copied_into_redis_by_the_leader(make_settings, caplog):
    """Limits per group (issue 47, item 3): init-db makes the table; the leader's job copies it
    into Redis (a group named by its value, whatever the group column's type), leaving out a row
    no limit can be, with one line (not one a run); `inspect` and the take then keep the group's own
    limits."""
    settings = grouped(make_settings).evolve(group_limits_table="merchant_limits")
    made = recheck("init-db", "--apply", settings=settings)
    assert made.returncode == 0 and "created table" in made.stdout and "merchant_limits" in made.stdout, made
    run_sql(settings, "INSERT INTO merchant_limits VALUES ('acme', 5, NULL, 3), ('äcme', NULL, 2, NULL), "
                      "('broken', -1, NULL, NULL)")  # fmt: skip
    store = make_store(settings)
    db = Database(settings)
    try:
        copier = GroupLimitsCopier(settings, db, store)
        assert copier.run_once() == 2 and copier.run_once() == 2
        warned = [r.getMessage() for r in caplog.records if "no limit can be" in r.getMessage()]
        assert len(warned) == 1 and "broken" in warned[0], warned  # once, not every run
        own = store.client.hgetall(store.keys.groups_limits)
        assert own == {
            b"acme".hex().upper().encode(): b"5.0::3",
            "äcme".encode().hex().upper().encode(): b":2:",
        }
        run_sql(settings, "DELETE FROM merchant_limits WHERE group_value = 'acme'")
        GroupLimitsCopier(settings, db, store).run_once()  # a row deleted: its group has the workload's again
        assert list(store.client.hgetall(store.keys.groups_limits)) == [
            "äcme".encode().hex().upper().encode()
        ]
    finally:
        db.close()
    take_lease(settings)
    store.push(TEST_LEADER, [entry(i, "äcme") for i in range(1, 6)])
    assert len(store.take("w1", 10).entries) == 2  # its own room: 2
    assert "held back: 2 checks running" in store.group_state("äcme".encode().hex().upper().encode())


# -- real workers ---------------------------------------------------------------------------------
def calls_per_group(folder: Path, group_of) -> dict[str, list[float]]:
    calls: dict[str, list[float]] = defaultdict(list)
    for file in folder.glob("*.stamps"):
        for line in file.read_text().splitlines():
            at, key = line.split()
            calls[group_of(int(key))].append(float(at))
    return {group: sorted(times) for group, times in calls.items()}


@pytest.mark.serial
def test_one_big_group_neither_exceeds_its_rate_nor_delays_two_hundred_small_ones(
    make_settings, procs, tmp_path
):
    """3 workers; one group with 20,000 due rows, 200 groups of 10; group_rate_limit 5/s (a small
    group needs 10 calls every 3 s: two thirds of its limit)."""
    interval = 3.0
    settings = grouped(make_settings, {"group_rate_limit": 5.0}, interval=interval)
    seed_rows(settings, 22_000, due_now=True)
    run_sql(
        settings,
        f"UPDATE {settings.table} "
        "SET tenant = IF(user_id <= 20000, 'big', CONCAT('s', (user_id - 20001) DIV 10))",
    )

    def group_of(key: int) -> str:
        return "big" if key <= 20_000 else f"s{(key - 20_001) // 10}"

    def small_rows() -> dict[int, list[float]]:
        return {key: times for key, times in calls_per_group(tmp_path, int).items() if key > 20_000}

    env = {**STAMPED, "TEST_CHECK_RECORD": str(tmp_path)}
    started_processes = [procs.start("dispatcher", settings)]
    started_processes += [procs.start("worker", settings, env=env) for _ in range(3)]
    for process in started_processes:  # start-up on a busy machine is not the groups' doing
        procs.wait_started(process)
    started = time.time()
    # Until every small row has been checked twice (once at the start, once an interval later).
    wait_for(lambda: sum(len(t) >= 2 for t in small_rows().values()) == 2000, 30, "two rounds of small rows",
             interval=0.25)  # fmt: skip
    calls = calls_per_group(tmp_path, group_of)
    assert len(calls) == 201, len(calls)
    # The rate: in any window of one second, at most 5 + one grant (1 token at 5/s).
    worst = max(
        max(sum(1 for t in times[i:] if t < start + 1.0) for i, start in enumerate(times))
        for times in calls.values()
    )
    assert worst <= 6, worst
    # The small groups: each row checked within interval + 2 s of the start, and again after.
    by_row = small_rows()
    latest = max(min(times) for times in by_row.values()) - started
    assert latest <= interval + 2, latest
    widest = max(b - a for times in by_row.values() for a, b in itertools.pairwise(sorted(times)))
    assert widest <= interval + 2, widest  # and again each interval
    big_rate = sum(t >= started for t in calls["big"]) / (time.time() - started)
    assert big_rate <= 5.5, big_rate  # 5 a second plus one token over the seconds measured
    counts = Counter(len(v) for k, v in calls.items() if k != "big")
    print(f"groups: the latest first check of a small row {latest:.2f} s after the start, the widest "
          f"gap between a small row's checks {widest:.2f} s; the big group {big_rate:.2f}/s, at most "
          f"{worst} calls of one group in a second; calls per small group {dict(counts)}")  # fmt: skip
    # Status names the group held back with the most rows waiting: the big one whenever it is held
    # back, which is nearly always (a sample can find it between two visits, back in the ring).
    named = "limited by group big"
    wait_for(lambda: named in recheck("status", settings=settings).stdout, 15, f"status saying {named!r}")


@pytest.mark.serial
def test_a_groups_in_flight_limit_counts_calls_and_its_slots_serve_the_next_calls(
    make_settings, procs, redis_server, mariadb
):
    """Issue 47, item 2: 3 workers of per-row checks of 0.2 s, one group of 3,000 due rows,
    group_max_in_flight 20: never more than 20 calls at once, counted by the check itself, and the
    slots used: a slot goes to the next call when a check ends, not when its write-back is done.
    The workers reach MySQL through 0.1 s of latency each way (their write-backs take 0.2-0.6 s;
    nothing else of theirs touches MySQL), so a slot held until the write-back would cost each
    call that much: 20 / (0.2 + 0.2) s, 50/s at the very most, against 100/s for 20 slots."""
    settings = grouped(
        make_settings, {"group_max_in_flight": 20}, interval=3600, concurrency=50, check_kind="row"
    )
    seed_rows(settings, 3000, due_now=True)
    run_sql(settings, f"UPDATE {settings.table} SET tenant = 'acme'")
    with FaultProxy("127.0.0.1", mariadb.port) as slow_mysql:
        slow_mysql.set_latency(0.1)
        slow_url = settings.mysql_url.replace(f":{mariadb.port}/", f":{slow_mysql.port}/")
        env = {"RECHECK_CHECK": "tests.support.checks:counted_row", "TEST_CHECK_SLEEP": "0.2",
               "TEST_REDIS_URL": redis_server.url(), "RECHECK_MYSQL_URL": slow_url}  # fmt: skip
        counter = redis_server.client()
        procs.start("dispatcher", settings)
        for _ in range(3):
            procs.start("worker", settings, env=env)
        enough = 0.7 * 20 / 0.2
        rate = counted_rate(counter, 6, enough, windows=5)  # the best of five: a neighbour slows some
        most = int(counter.get("test:most"))
        procs.stop_all()
    print(f"group_max_in_flight 20: most at once {most}, {rate:.1f} checks/s of 0.2 s")
    assert most <= 20
    # 70/s: well above the 50/s a slot held through the write-back allows, with room for a slow
    # machine. On the slowest VM yet (2026-12-01): 84.8-85.0/s; with the room given back at the
    # ack instead (RowLoop.frees_group_room off), 30.5-31.5/s. Without the latency the two were
    # 85-89/s and 76-80/s, and one run read 52.7/s: the workers that end a group's checks take its
    # room again first, so one process ran every call, and its CPU was the limit.
    assert rate >= enough, rate


@pytest.mark.serial
def test_a_merchants_express_rows_start_before_its_import_within_its_limit(
    make_settings, procs, redis_server, tmp_path
):
    """Groups with priority (issue 46, item 6), the order outbox: one merchant's 3,000-row import
    at group_max_in_flight 10 (per-row checks of 0.1 s: about 100/s, 30 s of work); 20 express
    rows made due 2 s in start within a second or two, long before the import is done, and the
    merchant never has more than 10 calls at once. (With groups alone they waited for the import:
    docs/groups.md gives both figures.)"""
    settings = grouped(
        make_settings, {"group_max_in_flight": 10}, interval=3600, concurrency=20, check_kind="row"
    ).evolve(priority_column="express")
    due = settings.due_column
    run_sql(settings, f"ALTER TABLE {settings.table} ADD COLUMN express TINYINT NOT NULL DEFAULT 0, "
                      f"ADD KEY express_due (express, {due}, {settings.id_column})")  # fmt: skip
    seed_rows(settings, 3020, due_now=True)
    run_sql(settings, f"UPDATE {settings.table} SET tenant = 'acme', "
                      f"{due} = IF(user_id > 3000, '2099-01-01', {due})")  # fmt: skip
    env = {"RECHECK_CHECK": "tests.support.checks:counted_row", "TEST_CHECK_SLEEP": "0.1",
           "TEST_REDIS_URL": redis_server.url(), "TEST_CHECK_RECORD": str(tmp_path)}  # fmt: skip
    counter = redis_server.client()
    procs.start("dispatcher", settings)
    for _ in range(2):
        procs.start("worker", settings, env=env)
    wait_for(lambda: int(counter.get("test:done") or 0) >= 200, 30, "the import under way")
    made_due = time.time()
    run_sql(settings, f"UPDATE {settings.table} SET express = 1, {due} = NOW(3) WHERE user_id > 3000")
    express = range(3001, 3021)

    def started() -> dict[int, float]:
        stamps = (line.split() for f in tmp_path.glob("*.stamps") for line in f.read_text().splitlines())
        return {int(key): float(at) for at, key in stamps}

    wait_for(lambda: all(key in started() for key in express), 20, "the express rows' checks")
    done_then = int(counter.get("test:done"))
    late = sorted(started()[key] - made_due for key in express)
    print(f"groups with priority: 20 express rows started {late[0]:.2f}-{late[-1]:.2f} s after they "
          f"were made due, {done_then} of the 3,000-row import checked by then; at most "
          f"{int(counter.get('test:most'))} calls at once")  # fmt: skip
    assert late[-1] <= 3.0 + SCHEDULING_SLACK_S, late
    assert done_then < 2000, done_then  # the import was far from done: they did not wait for it
    assert int(counter.get("test:most")) <= 10


# The others' rate during the outage against m0's before it: 196/s alone on the slowest VM yet
# (bound 150), 114/s there beside the weights test (2026-12-01).
@pytest.mark.alone
def test_one_merchant_down_its_breaker_holds_its_rows_and_the_others_keep_their_rhythm(
    make_settings, procs, tmp_path
):
    """The breaker per group (issue 47, item 1) on real workers: 1,000 rows every 4 s in 4 groups
    of 250 (250 checks/s), one group's calls failing for 6 s. Its calls fall to a probe per open
    time; the other groups keep their rhythm; once it answers again it is back within its
    longest open time (2 s here) and a poll."""
    settings = grouped(
        make_settings,
        {"group_breaker_failures": 5, "group_breaker_open": 0.5, "group_breaker_open_max": 2.0},
        interval=4.0,
    )
    seed_rows(settings, 1000, due_now=True)
    spread = "INTERVAL (user_id * 16) % 4000 * 1000 MICROSECOND"  # each group due over the interval
    run_sql(settings, f"UPDATE {settings.table} SET tenant = CONCAT('m', (user_id - 1) DIV 250), "
                      f"{settings.due_column} = NOW(3) + {spread}")  # fmt: skip
    down = tmp_path / "down"
    env = {"RECHECK_CHECK": "tests.support.checks:one_group_down", "TEST_CHECK_RECORD": str(tmp_path),
           "TEST_PROVIDER_DOWN": str(down), "TEST_DOWN_UP_TO": "250"}  # fmt: skip
    procs.start("dispatcher", settings)
    for _ in range(2):
        procs.start("worker", settings, env=env)

    def calls() -> dict[str, list[float]]:
        return calls_per_group(tmp_path, lambda key: f"m{(key - 1) // 250}")

    wait_for(lambda: len(calls().get("m0", [])) >= 250, 20, "every row of m0 checked once")
    before_start = time.time()
    time.sleep(4)  # a sampling period: the groups' rate before
    before = sum(1 for t in calls()["m0"] if t >= before_start) / 4
    store = make_store(settings)
    down.touch()
    outage_start = time.time()
    wait_for(lambda: store.group_overview().open_count == 1, 5, "m0's breaker open")
    # Counted from the opening, not from the outage's first second: five failures acknowledged
    # opened it 0.9-1.6 s in (five runs, 2026-11-29), and beside a CPU hog the old window counted
    # calls made before it (4 calls/s). Checks of m0 taken before it opened still run
    # (_group_breaker.lua): the ids workers hold now are set aside.
    held = {int(entry.split(b":", 1)[0]) for worker in store.worker_ids() for entry in store.held(worker)}
    opened = time.time()
    time.sleep(max(outage_start + 5 - time.time(), 0.0))  # the outage: sampled
    status = recheck("status", settings=settings).stdout  # while it lasts
    down.unlink()
    outage_end = time.time()
    by_key = calls_per_group(tmp_path, int)
    m0_during = [
        t for key in range(1, 251) if key not in held for t in by_key.get(key, []) if opened <= t < outage_end
    ]
    during = len(m0_during) / (outage_end - opened)
    wait_for(
        lambda: sum(1 for t in calls()["m0"] if t >= outage_end) >= 50, 2.0 + 4.0 + SCHEDULING_SLACK_S,
        "m0 back at its rate",
    )  # fmt: skip
    back_after = sorted(t for t in calls()["m0"] if t >= outage_end)[49] - outage_end
    others = [t for name, times in calls().items() if name != "m0" for t in times]
    rate_others = sum(1 for t in others if outage_start <= t < outage_end) / (outage_end - outage_start)
    print(f"breaker: m0 {before:.1f} calls/s before, {during:.2f}/s during its outage (once its "
          f"breaker opened, {opened - outage_start:.2f} s in, {len(held)} ids then held aside), its "
          f"50th call {back_after:.2f} s after it recovered; the other groups {rate_others:.1f} "
          f"calls/s during it")  # fmt: skip
    assert during <= 0.05 * before, (during, before)
    assert rate_others >= 0.8 * 3 * before, (rate_others, before)  # 3 groups, as many rows each
    assert "breaker open for 1: m0" in status, status


# 2.84:1 and 3.04:1 alone on the slowest VM yet, 2.66:1 there beside the breaker test, whose
# workers left these about 195 calls/s of the 800 they run on a faster VM (2026-12-01).
@pytest.mark.alone
def test_a_weight_of_three_gets_three_times_the_calls_on_real_workers(
    make_settings, procs, redis_server, tmp_path
):
    """Weights (issue 47, item 3) end to end: 2 workers of per-row checks (0.05 s, 20 at once
    each: about 800 calls/s), two merchants with 20,000 due rows each,
    the first with weight 3 in the group limits table (copied by the leader within 5 s): while both
    wait, it gets 3x the other's calls (within 10 %)."""
    settings = grouped(make_settings, interval=3600, concurrency=20, check_kind="row").evolve(
        group_limits_table="merchant_limits"
    )
    assert recheck("init-db", "--apply", settings=settings).returncode == 0
    run_sql(settings, "INSERT INTO merchant_limits VALUES ('heavy', NULL, NULL, 3)")
    seed_rows(settings, 40_000, due_now=True)
    run_sql(settings, f"UPDATE {settings.table} SET tenant = IF(user_id <= 20000, 'heavy', 'light')")
    env = {"RECHECK_CHECK": "tests.support.checks:counted_row", "TEST_CHECK_SLEEP": "0.05",
           "TEST_REDIS_URL": redis_server.url(), "TEST_CHECK_RECORD": str(tmp_path)}  # fmt: skip
    procs.start("dispatcher", settings)
    for _ in range(2):
        procs.start("worker", settings, env=env)

    def calls() -> dict[str, list[float]]:
        return calls_per_group(tmp_path, lambda key: "heavy" if key <= 20_000 else "light")

    # (a warm-up, not a speed: on a slow VM beside neighbours the workers ran 128 calls/s, not 800)
    wait_for(lambda: len(calls().get("light", [])) >= 1000, 90, "checks under way")
    limits = redis_server.client()
    key = Keys.every_partition(settings)[0].groups_limits  # the leader's copy of the table
    wait_for(lambda: limits.exists(key), 15, "the leader's first copy of the group limits table")
    start = time.time()
    time.sleep(4)  # a sampling period
    counted = {group: sum(1 for t in times if start <= t < start + 4) for group, times in calls().items()}
    print(f"weights 3 and 1 on real workers: {counted} calls in 4 s")
    assert counted["light"] < 20_000 - 1000  # both still waiting
    assert 2.7 <= counted["heavy"] / counted["light"] <= 3.3, counted
