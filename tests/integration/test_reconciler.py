"""Reconciler jobs, called directly through run_once(), against real servers."""

from __future__ import annotations

import threading

from recheck.commands.init_db import init_db
from recheck.dispatcher.dispatcher import END, DuePusher
from recheck.dispatcher.reconciler import (
    FORGET_EVERY,
    OrphanCollector,
    Reclaimer,
    Settler,
    Sweeper,
    SweepProbe,
)
from recheck.shared.core.entries import datetime_to_ms, make_entry, parse_entries
from recheck.shared.core.records import DispatcherBeat, WorkerBeat
from recheck.shared.mysql.db import Database
from recheck.shared.process.presence import Presence
from recheck.shared.redis.connection import connect_redis
from recheck.shared.redis.keys import Keys
from recheck.shared.redis.store import GROUP_CHUNK, Store, open_store
from tests.support import checks
from tests.support.clock import ManualClock
from tests.support.helpers import (
    TEST_LEADER,
    dispatch_all,
    make_pusher,
    make_store,
    only_workload,
    query,
    recheck,
    round_trips,
    scalar,
    seed_rows,
    take_lease,
    workload,
)
from tests.support.servers import RedisCluster, wait_for


def job(cls, settings):
    if cls is Sweeper:
        return Sweeper(settings, make_pusher(settings))
    return cls(settings, Database(settings), make_store(settings))


def kill(worker, rds) -> None:
    """As if the worker died: no more heartbeats, its key gone (in every partition)."""
    worker.close()
    rds.delete(
        *(k.heartbeat(worker.id) for lane in worker.lanes for k in Keys.every_partition(lane.workload))
    )


def test_a_live_worker_is_left_alone(make_worker, settings, rds):
    seed_rows(settings, 10, due_now=True)
    dispatch_all(settings)
    worker = make_worker(settings, checks.ok)
    worker.lane(settings.name).intake.take(10)
    assert job(Reclaimer, settings).run_once() == (0, 0)
    assert rds.scard(Keys(settings.deployment.key_prefix).processing(worker.id)) == 10


def test_a_dead_workers_entries_come_back_as_eight_smaller_batches_first(make_worker, settings, sql, rds):
    seed_rows(settings, 30, due_now=True)
    dispatch_all(settings)
    keys = Keys(settings.deployment.key_prefix)
    dead = make_worker(settings, checks.ok)
    assert len(dead.lane(settings.name).intake.take(20)) == 20
    kill(dead, rds)
    assert job(Reclaimer, settings).run_once() == (20, 0)
    assert rds.llen(keys.suspects) == 8  # 20 entries in 8 groups of 3 or 2
    assert not rds.sismember(keys.workers, dead.id)
    assert rds.hlen(keys.inflight) == 30  # still in transit: nothing can dispatch them twice
    rescuer = make_worker(settings, checks.ok)
    first = rescuer.lane(settings.name).intake.take(500)
    assert len(first) == 3  # one group, taken before the 10 ids still in the queue
    assert all(rds.hget(keys.reclaims, e.split(b":")[0]) == b"1" for e in first)
    rescuer.lane(settings.name).batch.process(first)
    assert all(rds.hget(keys.reclaims, e.split(b":")[0]) is None for e in first)  # completed: forgiven


def test_a_dead_workers_entries_over_16_partitions_come_back_as_about_eight_batches(
    make_worker, make_settings, rds
):
    """SPLIT_WAYS in all, not in each partition: a batch of 200 over 16 partitions came back as
    about 128 batches of 1 or 2, each a take and a write of its own."""
    settings = make_settings(partitions=16)
    seed_rows(settings, 200, due_now=True)
    dispatch_all(settings)
    dead = make_worker(settings, checks.ok)
    taken = dead.lane(settings.name).intake.take(200)
    assert len(taken) == 200
    kill(dead, rds)
    assert job(Reclaimer, settings).run_once() == (200, 0)
    every = Keys.every_partition(settings)
    groups = [group for k in every for group in rds.lrange(k.suspects, 0, -1)]
    assert sorted(e for group in groups for e in group.split()) == sorted(taken)
    holding = sum(1 for k in every if rds.llen(k.suspects))
    assert len(groups) == holding <= 16, len(groups)  # one batch per partition holding some


def test_over_16_partitions_a_group_that_dies_again_is_split_again_whatever_else_its_worker_held(
    make_worker, make_settings, rds
):
    """A poison id's group must keep shrinking: held beside 15 other groups, its partition's
    share is a sixteenth of what its worker held, and the proportional split gave it 1 batch."""
    settings = make_settings(partitions=16)
    seed_rows(settings, 200, due_now=True)
    dispatch_all(settings)
    every = Keys.every_partition(settings)
    reclaimer = job(Reclaimer, settings)
    first = make_worker(settings, checks.ok)
    assert len(first.lane(settings.name).intake.take(200)) == 200
    kill(first, rds)
    assert reclaimer.run_once() == (200, 0)  # one group in each partition holding some
    second = make_worker(settings, checks.ok)
    taken = 0
    while batch := second.lane(settings.name).intake.take(500):  # every group, each alone
        taken += len(batch)
    assert taken == 200
    kill(second, rds)
    assert reclaimer.run_once() == (200, 0)
    for k in every:
        share = sum(len(group.split()) for group in rds.lrange(k.suspects, 0, -1))
        assert rds.llen(k.suspects) == min(8, share), (k.suspects, share)


def test_an_id_that_keeps_killing_workers_is_quarantined_then_released(make_worker, make_settings, sql, rds):
    settings = make_settings(max_reclaims=3)  # same database as `sql`
    seed_rows(settings, 3, due_now=True)
    dispatch_all(settings)
    keys = Keys(settings.deployment.key_prefix)
    reclaimer = job(Reclaimer, settings)
    dead = make_worker(settings, checks.ok)
    assert len(dead.lane(settings.name).intake.take(3)) == 3
    kill(dead, rds)  # dies with the whole batch: all three become suspects
    assert reclaimer.run_once() == (3, 0)
    quarantined = 0
    for _ in range(10):  # three groups of one; id 1 kills every worker that takes it
        worker = make_worker(settings, checks.ok)
        taken = worker.lane(settings.name).intake.take(500)
        if not taken:
            break
        assert len(taken) == 1
        if parse_entries(taken)[0][0].id == 1:
            kill(worker, rds)
            quarantined += reclaimer.run_once()[1]
        else:
            worker.lane(settings.name).batch.process(taken)
    assert quarantined == 1
    due, error = query(sql, "SELECT next_check_at, last_error FROM user_block_status WHERE user_id = 1")[0]
    assert due.year == 9999
    assert "quarantined: its worker died twice while checking this row alone, after 3+ deaths" in error
    assert not rds.hexists(keys.inflight, "1") and not rds.hexists(keys.quarantine, "1")
    # The innocent batch-mates were checked, alone, and are not quarantined.
    assert query(sql, "SELECT user_id, check_count FROM user_block_status WHERE user_id > 1") == (
        (2, 1),
        (3, 1),
    )
    assert rds.hlen(keys.inflight) == 0

    status = recheck("status", "--json", settings=settings)
    facts = only_workload(status.stdout)
    assert facts["quarantined"] == 1, status.stderr
    assert (
        facts["quarantined_ids"][0]["id"] == "1"
        and "after 3+ deaths" in facts["quarantined_ids"][0]["reason"]
    )
    assert (
        "quarantined id 1: quarantined: its worker died twice while checking this row alone"
        in recheck("status", settings=settings).stdout
    )
    released = recheck("release", "1", "2", settings=settings)
    assert released.returncode == 0 and "released, due now: 1" in released.stdout, released.stderr
    assert "left alone (not quarantined): 2" in released.stdout
    assert scalar(sql, "SELECT next_check_at <= NOW(3) FROM user_block_status WHERE user_id = 1") == 1
    assert not rds.hexists(keys.reclaims, "1")


def test_an_idle_reclaimer_reads_the_in_flight_hash_again_only_after_a_push(settings, rds, monkeypatch):
    """Only pushes put ids in flight: with nothing in flight and nothing pushed since, an idle
    reclaimer reads nothing (the workers are still looked at every IDLE_RECLAIM_EVERY s); a push,
    or coming to lead again, and it reads again, and a worker dead with the pushed id in hand is
    reclaimed at that run."""
    keys = Keys(settings.deployment.key_prefix)
    store = make_store(settings)
    assert store.hold_lease(TEST_LEADER, 60_000) == TEST_LEADER
    clock, gained = ManualClock(), [0]
    reclaimer = Reclaimer(settings, Database(settings), store, clock=clock,
                          pushes=lambda: (store.pushes, gained[0]))  # fmt: skip
    reads = []
    real = store.nothing_in_flight
    monkeypatch.setattr(store, "nothing_in_flight", lambda: reads.append(1) or real())
    assert reclaimer.run_once() == (0, 0)  # the first run looks at the workers
    for _ in range(3):
        clock.now += 1
        assert reclaimer.run_once() == (0, 0)
    assert len(reads) == 1  # read once, then nothing was pushed
    gained[0] += 1  # led again: another leader may have pushed meanwhile
    clock.now += 1
    reclaimer.run_once()
    assert len(reads) == 2
    assert store.push(TEST_LEADER, [make_entry(7, 1000)]).pushed == 1
    Presence(store, "worker", "w", 60).publish(WorkerBeat(id="w"))
    assert len(store.take("w", 10).entries) == 1
    rds.delete(keys.heartbeat("w"))  # the worker died holding it
    clock.now += 1
    assert reclaimer.run_once() == (1, 0)  # well before IDLE_RECLAIM_EVERY
    assert len(reads) == 3


def test_a_reclaimers_look_costs_two_round_trips_whatever_the_number_of_live_workers(
    settings, rds, monkeypatch
):
    """A run that looks at the workers read their registry and the ids set aside for quarantine
    together, then every heartbeat together; reclaim.lua runs for the dead ones only (it was a
    call per registered worker, live ones too: eight replicas, eight round trips every run)."""
    keys = Keys(settings.deployment.key_prefix)
    store = make_store(settings)
    assert store.hold_lease(TEST_LEADER, 60_000) == TEST_LEADER
    assert store.push(TEST_LEADER, [make_entry(7, 1000)]).pushed == 1
    for worker in ("w0", "w1", "w2", "w3", "dead"):
        Presence(store, "worker", worker, 60).publish(WorkerBeat(id=worker))
    assert len(store.take("dead", 10).entries) == 1
    rds.delete(keys.heartbeat("dead"))
    reclaimer = Reclaimer(settings, Database(settings), store, clock=ManualClock())
    reclaimer.forget_due = float("inf")  # the dispatchers' registry is another test's
    assert store.reclaim(0, "w0", 3, 8) is None  # reclaim.lua loaded: the test counts its calls
    sent = round_trips(monkeypatch)
    assert reclaimer.run_once() == (1, 0)
    assert sent()["redis"] == 3  # the look, the heartbeats, the dead worker's reclaim.lua
    assert reclaimer.run_once() == (0, 0)  # the reclaimed id in flight: the workers looked at again
    assert sent()["redis"] == 6  # the in-flight hash, the look, the heartbeats: none for the live ones
    assert rds.smembers(keys.workers) == {b"w0", b"w1", b"w2", b"w3"}


def test_the_settle_job_reads_nothing_while_nothing_can_have_been_given_back(settings, monkeypatch):
    """Entries reach another ordering's lists only when a worker gives back what it holds: with
    the in-flight hash seen empty by the reclaimer and nothing pushed since, nothing is held or
    queued anywhere, and the settle job (every 5 s per workload) reads nothing. A push, and it
    settles again; a new leader's settle runs whatever the job would say."""
    store = make_store(settings)
    assert store.hold_lease(TEST_LEADER, 60_000) == TEST_LEADER
    clock = ManualClock()
    reclaimer = Reclaimer(settings, Database(settings), store, clock=clock, pushes=lambda: store.pushes)
    settler = Settler(settings, store, TEST_LEADER, quiet=reclaimer.quiet)
    assert settler.run_once() == 0  # not known to be quiet yet: it settles
    reclaimer.run_once()  # the workers looked at
    clock.now += 1
    reclaimer.run_once()  # the in-flight hash read: empty
    sent = round_trips(monkeypatch)
    assert settler.run_once() == 0 and sent()["redis"] == 0
    assert settler.settle() == 0 and sent()["redis"] == 1  # the lane's, as a new leader
    assert store.push(TEST_LEADER, [make_entry(7, 1000)]).pushed == 1
    before = sent()["redis"]
    assert settler.run_once() == 0 and sent()["redis"] == before + 1


def test_the_sweep_redispatches_overdue_rows_nothing_holds(settings, sql, rds):
    settings = settings.evolve(sweep_grace=30.0)  # id 3 stays within it however slow the machine
    keys = Keys(settings.deployment.key_prefix)
    query(sql, "INSERT INTO user_block_status (user_id, next_check_at) VALUES "
               "(1, NOW(3) - INTERVAL 60 SECOND), (2, NOW(3) - INTERVAL 60 SECOND), (3, NOW(3))")  # fmt: skip
    rds.hset(keys.inflight, "2", 1)  # id 2 is already in flight
    assert job(Sweeper, settings).run_once() == 1  # only id 1: 2 is held, 3 is within the grace
    assert [item.id for item in parse_entries(rds.lrange(keys.queue, 0, -1))[0]] == [1]
    assert job(Sweeper, settings).run_once() == 0  # and never twice


def test_orphans_nothing_holds_are_released_held_ones_are_not(make_worker, settings, sql, rds):
    keys = Keys(settings.deployment.key_prefix)
    old, recent = 1000, 10**15  # due ms: long ago, far future
    rds.hset(keys.inflight, mapping={"1": old, "2": old, "3": old, "4": recent})
    rds.rpush(keys.queue, make_entry(2, old))  # 2 waits in the queue
    worker = make_worker(settings, checks.ok)
    rds.sadd(keys.processing(worker.id), make_entry(3, old))  # 3 is held by a live worker
    released = job(OrphanCollector, settings).run_once()
    assert released == [1]  # held ids stay; 4 is too recent to judge
    assert sorted(rds.hkeys(keys.inflight)) == [b"2", b"3", b"4"]


def queued_backlog(rds, keys, ids: range, due: int) -> None:
    """`ids` in flight for `due` and waiting in the queue, as a backlog of dispatched rows is."""
    for start in range(ids.start, ids.stop, 10_000):
        part = range(start, min(start + 10_000, ids.stop))
        rds.hset(keys.inflight, mapping=dict.fromkeys(map(str, part), due))
        rds.rpush(keys.queue, *(make_entry(i, due) for i in part))


def slow_scripts(rds) -> list[dict]:
    """The scripts Redis ran for 50 ms or more since the slow log was reset (its own clock)."""
    return [e for e in rds.slowlog_get(100) if b"EVAL" in e["command"]]  # EVALSHA too


def test_a_backlog_older_than_orphan_after_is_not_read_in_one_script_and_an_orphan_behind_it_is_found(
    settings, rds
):
    """Under a backlog older than orphan_after every queued id is a candidate. Judging them must not
    read the whole queue in one script (Redis serves nobody meanwhile: 0.3 s for 100,000 entries
    here, 3 s for 1,000,000), and an orphan must be found however many candidates come before it
    in the in-flight hash (each run went on with the first 1,000 the scan gave, the same each run)."""
    keys = Keys(settings.deployment.key_prefix)
    old = 1000
    queued_backlog(rds, keys, range(1, 100_001), old)
    threshold = rds.config_get("slowlog-log-slower-than")["slowlog-log-slower-than"]
    rds.config_set("slowlog-log-slower-than", 50_000)
    rds.slowlog_reset()
    try:
        collector = job(OrphanCollector, settings)
        assert collector.run_once() == []
        assert slow_scripts(rds) == []
        rds.hset(keys.inflight, "100001", old)  # in flight, waiting nowhere: an orphan
        released: list = []
        for _ in range(12):  # at most 10,000 candidates a run: 11 runs reach every one
            released += collector.run_once()
        assert released == [100_001]
        assert rds.hlen(keys.inflight) == 100_000 and rds.llen(keys.queue) == 100_000
    finally:
        rds.config_set("slowlog-log-slower-than", threshold)


def test_ids_waiting_in_groups_lists_or_held_are_no_orphans(make_settings, rds):
    settings = make_settings().evolve(group_column="tenant", group_rate_limit=5.0, group_max_in_flight=1)
    keys = Keys(settings.deployment.key_prefix)
    store = make_store(settings)
    take_lease(settings)
    store.push(TEST_LEADER, [f"{i}:1000:{i % 300:X}".encode() for i in range(1, 3001)])  # 300 groups
    store.push(TEST_LEADER, [f"{i}:1000:B16".encode() for i in range(5001, 7001)])  # one big group
    held = store.take("w1", 100).entries  # held by a worker that is registered
    rds.sadd(keys.workers, "w1")
    assert rds.scard(keys.groups_full) > 0 and rds.llen(keys.group_ring) > 0  # at their room, and in turn
    assert rds.llen(keys.group_list(b"B16")) > GROUP_CHUNK  # read in chunks
    # One of each other place an entry can be: landing, the priority list, a reclaimed batch.
    rds.hset(keys.inflight, mapping={"9001": 1000, "9002": 1000, "9003": 1000, "9004": 1000, "9005": 1000})
    rds.rpush(keys.landing("w1"), make_entry(9003, 1000))
    rds.rpush(keys.priority_queue, make_entry(9004, 1000))
    rds.rpush(keys.suspects, make_entry(7, 1) + b" " + make_entry(9005, 1000))
    rds.hset(keys.quarantine, "9002", "set aside")  # set aside for quarantine: held too
    flying = [part for pair in rds.hgetall(keys.inflight).items() for part in pair]
    # Read in chunks, without the script: only the orphan is left for orphans.lua to judge.
    assert store.not_seen_anywhere(0, flying, ["w1"]) == [b"9001", b"1000"]
    assert job(OrphanCollector, settings).run_once() == [9001]
    assert rds.hlen(keys.inflight) == 5004 and len(held) == 100


def test_entries_taken_while_the_lists_are_read_are_seen_where_they_went(settings, rds):
    """The reads go from each list's tail: takes pop at the head, and read from the head each pop
    would shift an entry not read yet behind the next read (then orphans.lua reads everything)."""
    keys = Keys(settings.deployment.key_prefix)
    queued_backlog(rds, keys, range(1, 300_001), 1000)
    rds.sadd(keys.workers, "w1")
    candidates = [part for i in range(30, 300_001, 30) for part in (str(i).encode(), b"1000")]
    taking, stop = make_store(settings), threading.Event()

    def take() -> None:
        while not stop.is_set():
            taking.take("w1", 500)

    thread = threading.Thread(target=take)
    thread.start()
    try:
        wait_for(lambda: rds.scard(keys.processing("w1")) > 0, 10, "the takes under way")
        before = rds.llen(keys.queue)
        left = make_store(settings).not_seen_anywhere(0, candidates, ["w1"])
        during = before - rds.llen(keys.queue)
    finally:
        stop.set()
        thread.join()
    assert during > 2_000, during  # entries went from the queue to the worker during the reads
    assert left == []


def test_the_sweep_leaves_rows_ahead_of_the_dispatchers_cursor_to_the_dispatcher(settings, sql, rds):
    keys = Keys(settings.deployment.key_prefix)
    query(sql, "INSERT INTO user_block_status (user_id, next_check_at) VALUES "
               "(1, NOW(3) - INTERVAL 60 SECOND), (2, NOW(3) - INTERVAL 30 SECOND)")  # fmt: skip
    due_2 = datetime_to_ms(scalar(sql, "SELECT next_check_at FROM user_block_status WHERE user_id = 2"))
    # The dispatcher is catching up and has reached row 2: row 1 is behind it (lost), row 2 is its own.
    sweeper = Sweeper(settings, make_pusher(settings), dispatcher_cursor=lambda: (due_2, 0))
    assert sweeper.run_once() == 1
    assert [item.id for item in parse_entries(rds.lrange(keys.queue, 0, -1))[0]] == [1]


def test_a_sweep_with_nothing_overdue_sets_no_guard_and_reads_no_depth(settings, sql, rds, monkeypatch):
    """In healthy running the sweep finds nothing behind the cursor: one read of MySQL, and no
    guard set or cleared, no queue depth read (an idle deployment's sweeps cost Redis nothing)."""
    query(sql, "INSERT INTO user_block_status (user_id, next_check_at) VALUES (1, NOW(3) + INTERVAL 1 HOUR)")
    sweeper = job(Sweeper, settings)
    store = sweeper.pusher.store
    calls = []
    for name in ("begin_guard", "end_guard", "queue_depth"):
        real = getattr(store, name)
        monkeypatch.setattr(store, name, lambda *a, real=real, name=name: calls.append(name) or real(*a))
    assert sweeper.run_once() == 0
    assert calls == []
    query(sql, "UPDATE user_block_status SET next_check_at = NOW(3) - INTERVAL 60 SECOND")
    assert sweeper.run_once() == 1  # overdue: read again under the guard, and pushed
    assert calls == ["queue_depth", "begin_guard", "end_guard"]


def test_a_row_completed_between_the_sweeps_read_and_its_push_is_not_queued_again(
    make_worker, settings, sql, rds
):
    """After an outage, held batches finish while the sweep reads overdue rows (the race)."""
    keys = Keys(settings.deployment.key_prefix)
    query(
        sql, "INSERT INTO user_block_status (user_id, next_check_at) VALUES (1, NOW(3) - INTERVAL 10 SECOND)"
    )
    dispatch_all(settings)
    worker = make_worker(settings, checks.ok)
    held = worker.lane(settings.name).intake.take(
        500
    )  # row 1 is in flight, held by a worker, overdue by 10 s
    sweeper = job(Sweeper, settings)
    real_query = sweeper.pusher.rows.db.query

    def read_then_worker_finishes(*args, **kwargs):
        rows = real_query(*args, **kwargs)  # the sweep reads row 1 as overdue, under its guard...
        if rds.exists(keys.sweep_guard) and held:  # (not its first, unguarded look)
            worker.lane(settings.name).batch.process(held)  # ...and the worker writes and acks it
            held.clear()  # before the push
        return rows

    sweeper.pusher.rows.db.query = read_then_worker_finishes
    assert sweeper.run_once() == 0
    assert not held  # the race did happen under the guard
    assert rds.llen(keys.queue) == 0 and rds.hlen(keys.inflight) == 0
    assert not rds.exists(keys.sweep_guard)  # the pass ended


def test_the_reclaimer_forgets_dead_dispatchers_once_a_minute(settings, rds, monkeypatch):
    """A dispatcher killed -9 never withdraws: its registration would stay for good, read by
    status and by every standby's sharing of the leases each second. The leader's reclaimer
    removes it at its first run, then every FORGET_EVERY seconds."""
    keys = Keys(settings.deployment.key_prefix)
    store = make_store(settings)
    clock = ManualClock()
    reclaimer = Reclaimer(settings, Database(settings), store, clock=clock)
    for member in ("d-live", "d-killed"):
        Presence(store, "dispatcher", member, 60).publish(DispatcherBeat(id=member))
    rds.delete(keys.dispatcher_heartbeat("d-killed"))
    calls = []
    real = store.forget_dead_dispatchers
    monkeypatch.setattr(store, "forget_dead_dispatchers", lambda: calls.append(1) or real())
    reclaimer.run_once()
    assert rds.smembers(keys.dispatchers) == {b"d-live"} and len(calls) == 1
    clock.now += FORGET_EVERY - 1
    reclaimer.run_once()
    assert len(calls) == 1  # not before its time: two commands a minute per partition
    clock.now += 1
    reclaimer.run_once()
    assert len(calls) == 2


def test_every_workloads_live_dispatchers_are_read_in_two_round_trips(settings, rds, monkeypatch):
    """A dispatcher shares the leases out from the live dispatchers of every workload's registry
    (DispatcherService.share, every RECHECK_LEADER_TTL): a registry and its heartbeats were two
    round trips per workload, twenty for ten idle job tables; now two in all, per Redis."""
    client = connect_redis(settings.deployment)  # a dispatcher's workloads share its client
    stores = [open_store(client, settings.evolve(key_prefix=f"share{i}")) for i in range(3)]
    for store, members in zip(stores, (["d-a", "d-b"], ["d-a", "d-killed"], []), strict=True):
        for member in members:
            Presence(store, "dispatcher", member, 60).publish(DispatcherBeat(id=member))
    rds.delete(Keys("share1").dispatcher_heartbeat("d-killed"))
    sent = round_trips(monkeypatch)
    live = Store.live_dispatchers_of(stores)
    assert [[beat.id for beat in beats] for beats in live] == [["d-a", "d-b"], ["d-a"], []]
    assert sent()["redis"] == 2


def test_the_reads_made_together_work_on_a_redis_cluster(make_settings, tmp_path):
    """The sharing's and the reclaimer's reads on a cluster, whose pipelines split by node and
    refuse some commands (MGET): registries and heartbeats of workloads in slots of their own,
    every partition of a partitioned one."""
    cluster = RedisCluster(tmp_path / "cluster", masters=3, replicas=0)
    cluster.start()
    try:
        settings = make_settings(partitions=4, redis_url=f"redis://127.0.0.1:{cluster.nodes[0].port}/0")
        client = connect_redis(settings.deployment)
        stores = [open_store(client, settings.evolve(key_prefix=f"share{i}")) for i in range(3)]
        for store, members in zip(stores, (["d-a", "d-b"], ["d-a", "d-killed"], []), strict=True):
            for member in members:
                Presence(store, "dispatcher", member, 60).publish(DispatcherBeat(id=member))
        client.delete(stores[1].keys.dispatcher_heartbeat("d-killed"))
        live = Store.live_dispatchers_of(stores)
        assert [[beat.id for beat in beats] for beats in live] == [["d-a", "d-b"], ["d-a"], []]
        store = stores[0]
        for worker in ("w0", "dead"):
            Presence(store, "worker", worker, 60).publish(WorkerBeat(id=worker))
        for k in store.partitions:
            client.delete(k.heartbeat("dead"))
        assert [store.reclaim_look(p).gone for p in range(4)] == [["dead"]] * 4
    finally:
        cluster.kill()


def test_one_statement_asks_every_sweep_on_a_server_and_only_the_overdue_read_again(
    settings, sql, monkeypatch
):
    """A dispatcher's sweeps of the workloads on one server are asked together (SweepProbe): one
    statement for all their passes, a priority pass's too, and a sweep told its passes are clear
    reads nothing. Ten idle workloads' sweeps were ten statements every sweep_interval."""
    settings = settings.evolve(sweep_grace=30.0)
    query(sql, "ALTER TABLE user_block_status ADD COLUMN premium TINYINT(1) NOT NULL DEFAULT 0, "
               "ADD KEY premium_due (premium, next_check_at, user_id)")  # fmt: skip
    first = settings.model_copy(update={"priority_column": "premium"})
    second, third = (workload(settings, name, table=f"{name}_rows") for name in ("second", "third"))
    for w in (second, third):
        assert init_db(w, apply=True, create=True, say=lambda _: None) == 0
    # The first: a priority row overdue (its priority pass's), the rest's row due in an hour. The
    # second: a row due now, within the grace. The third: a row overdue.
    query(sql, "INSERT INTO user_block_status (user_id, next_check_at, premium) VALUES "
               "(1, NOW(3) - INTERVAL 60 SECOND, 1), (2, NOW(3) + INTERVAL 1 HOUR, 0)")  # fmt: skip
    query(sql, "INSERT INTO second_rows (user_id, next_check_at) VALUES (1, NOW(3))")
    query(sql, "INSERT INTO third_rows (user_id, next_check_at) VALUES (1, NOW(3) - INTERVAL 60 SECOND)")
    sweepers = [Sweeper(w, make_pusher(w)) for w in (first, second, third)]
    priority = DuePusher(first, Database(first), make_store(first), TEST_LEADER, priority=True)
    priority.learn_keys()
    sweepers[0].also(priority, lambda: END)
    probe = SweepProbe(Database(settings))
    probe.probe.db.query("SELECT 1")  # connected (a session's setup is statements too)
    sent = round_trips(monkeypatch)
    probe.mark(sweepers)
    assert sent()["mysql"] == 1
    assert [s.clear for s in sweepers] == [{0}, {0}, set()]  # the rest's pass of the first, the second
    assert sweepers[1].run_once() == 0 and sent()["mysql"] == 1  # told clear: no read of its own
    assert sweepers[0].run_once() == 1  # the priority row, by its own pass
    assert sweepers[2].run_once() == 1
    assert all(s.clear == set() for s in sweepers)  # each run uses the probe's word once
    probe.mark(sweepers)
    assert [s.clear for s in sweepers] == [{0}, {0}, set()]  # queued, not overdue behind the cursor:
    assert sweepers[2].run_once() == 0  # ... the third reads (in flight: nothing pushed again)
    probe.close()
