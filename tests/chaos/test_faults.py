"""Fault injection: real processes and servers, one fault per test, invariants from MySQL.

Timings are the tests' (interval 2 s, heartbeat TTL 1 s, reclaim every 0.25 s, leader lease
1 s); each bound below is docs/guarantees.md's formula with these timings. Run with `-s` to see each
fault's figures (lateness, recovery time, duplicate checks).
"""

from __future__ import annotations

import contextlib
import signal
import time

import pymysql
import pytest

from recheck.shared.core.entries import parse_entries
from recheck.shared.outage import MAX_BACKOFF
from recheck.shared.redis.keys import Keys
from recheck.workers.writing.writeback import PATIENT_LOCK_WAITS
from tests.support.cluster import Cluster
from tests.support.helpers import scalar
from tests.support.processes import SCHEDULING_SLACK_S
from tests.support.servers import wait_for


def worker_bound(s) -> float:
    """A dead worker's ids: heartbeat expiry + reclaim period + checking its batch one id at a time."""
    return s.deployment.heartbeat_ttl + s.deployment.heartbeat_interval + s.deployment.reclaim_interval + 1.0


def killed_bound(cluster: Cluster) -> float:
    """How late the ids a killed worker held may be checked: docs/guarantees.md's bound, plus how
    late the victims' batches already were when they were killed (measured: carried_s), plus the
    suite's slack for a loaded machine.

    Judged on those ids only (Report.assert_invariants(of_killed_ids=True)): the other rows'
    lateness is the deployment's capacity. A kill every second leaves one worker short most of the
    time, and each restart's Python start-up (1.4 s of CPU on the slowest VM yet) competes for two
    cores: there, on 2026-12-01, every row of the table ran 1.2-1.7 s late on average during the
    kills while the killed workers' ids were checked 1.1-2.5 s after their lateness at the kill,
    and a bound on every row (2026-11-29 to 12-01) failed CI at 8.66 s against 6.99."""
    return worker_bound(cluster.settings) + cluster.carried_s + SCHEDULING_SLACK_S


@pytest.mark.alone  # beside another test on the slowest VM yet: the killed ids 7.63 s for 7.55 (2026-12-01)
def test_workers_killed_again_and_again_during_batches(clusters):
    cluster = clusters
    # Checks cost 1 ms a row (0.2 s a batch), so workers are caught holding ids; 4 workers have
    # twice the capacity the 5,000 rows every 2 s need.
    cluster.start(workers=4, check="tests.support.checks:row_cost", env={"TEST_CHECK_ROW_COST": "0.001"})
    kills, lost_batches = 6, 0
    for _ in range(kills):
        cluster.pause(1.0)
        lost_batches += cluster.kill_worker_mid_batch()
        cluster.start_worker()  # what compose's restart policy or `recheck run` does
    report = cluster.finish(f"kill -9 of a random worker mid-batch x{kills}")
    # Every id a killed worker held is checked again: that many duplicate checks, no more.
    report.assert_invariants(bound_s=killed_bound(cluster), max_duplicates=lost_batches, of_killed_ids=True)
    assert report.duplicates > 0  # the kills really landed mid-batch


def test_dispatcher_killed_then_restarted(cluster):
    cluster.start()
    cluster.pause(2)
    dispatcher = cluster.dispatchers[0]
    dispatcher.kill()
    dispatcher.wait()
    cluster.note("kill -9 dispatcher")
    down = 2.0
    cluster.pause(down)
    restarted = time.monotonic()
    dispatcher = cluster.start_dispatcher()
    cluster.procs.wait_started(dispatcher)
    start_up = time.monotonic() - restarted
    cluster.note(f"dispatcher restarted, up {start_up:.2f} s later")
    report = cluster.finish("kill -9 of the dispatcher, restarted 2 s later")
    # Rows due while no dispatcher ran wait for it: downtime + its start-up (measured: 1-1.5 s on a
    # quiet machine, more beside another test on a slow VM, where a fixed 1.5 s for it failed by
    # 0.14 s, 2026-12-01) + a poll and the backlog's drain (the whole table fell due meanwhile).
    report.assert_invariants(bound_s=down + start_up + 1.5, max_duplicates=0)


def leader_pid(cluster) -> int:
    holder = cluster.redis.client().get(Keys(cluster.settings.deployment.key_prefix).leader)
    assert holder, "no dispatcher holds the lease"
    return int(holder.decode().split("-")[-2])  # ids are host-pid-random


def test_leader_killed_standby_takes_over(cluster):
    cluster.start(dispatchers=2)
    cluster.pause(1)
    takeover = cluster.kill_the_leader()
    s = cluster.settings
    bound = s.deployment.leader_ttl + s.deployment.heartbeat_interval + SCHEDULING_SLACK_S
    assert takeover < bound, f"takeover {takeover:.2f} s, bound {bound:.2f} s"
    report = cluster.finish("kill -9 of the leading dispatcher (2 running)")
    report.assert_invariants(bound_s=bound + 1.0, max_duplicates=0)


def test_two_dispatchers_active_for_a_moment_never_duplicate(cluster):
    cluster.start(dispatchers=2)
    keys = Keys(cluster.settings.deployment.key_prefix)
    rds = cluster.redis.client()
    old = leader_pid(cluster)
    leader = next(p for p in cluster.dispatchers if p.pid == old)
    leader.send_signal(signal.SIGSTOP)  # its lease expires while it cannot notice
    cluster.note(f"SIGSTOP leader pid {old}")
    wait_for(lambda: leader_pid(cluster) != old, 10, "the standby to take the lease")
    leader.send_signal(signal.SIGCONT)  # it wakes up still believing it leads
    cluster.note("SIGCONT old leader")
    duplicates_in_queue = 0
    for _ in range(40):  # sample the queue while both may try to push
        entries = rds.lrange(keys.queue, 0, -1)
        ids = [item.id for item in parse_entries(entries)[0]]
        duplicates_in_queue += len(ids) - len(set(ids))
        time.sleep(0.05)
    assert duplicates_in_queue == 0
    report = cluster.finish("leader paused past its lease, then resumed (split brain)")
    # It notices it no longer leads in one of three ways, whichever comes first after SIGCONT: a
    # refused push (deposed), its heartbeat's renewal (lost the lease), or the page it was stopped
    # in the middle of, under way longer than the lease (giving up the lease: CI, 2026-11-26).
    log = cluster.procs.log_of(leader)
    assert any(said in log for said in ("deposed", "lost the lease", "giving up the lease")), log
    s = cluster.settings
    report.assert_invariants(
        bound_s=s.deployment.leader_ttl + s.deployment.heartbeat_interval + 1.5, max_duplicates=0
    )


def test_redis_restarted_with_all_data_lost(clusters):
    cluster = clusters
    cluster.start()
    cluster.pause(2)
    cluster.redis.kill()
    cluster.note("kill -9 redis (no persistence: everything in flight is gone)")
    down = 2.0
    cluster.pause(down)
    cluster.redis.start()
    cluster.note("redis back, empty")
    report = cluster.finish("Redis restarted with all data lost")
    s = cluster.settings
    bound = down + MAX_BACKOFF + s.deployment.sweep_grace + s.deployment.sweep_interval
    # Checks whose result was written but whose acknowledgement was lost with Redis are not
    # repeated (the write moved the due time on); a batch in hand is written once, fenced.
    report.assert_invariants(bound_s=bound, max_duplicates=len(cluster.workers) * s.worker_batch)


def test_mariadb_killed_and_restarted(tmp_path, procs):
    """A crash of the database server itself, durable settings (innodb_flush_log_at_trx_commit=1).

    Batches in hand are written once MariaDB is back (fenced, so a retry after a lost reply is
    safe), and rows the sweep rereads while those batches finish are not queued again. A write
    retried after the crash that finds its rows locked now waits PATIENT_LOCK_WAITS lock waits
    for them (workers/writing/writeback.py) before deferring them. Still a known defect: in one of seven
    runs on 2026-11-23 (repeated checks 0, 0, 400, 0, 10, 0, 0) two workers' batches stayed
    locked longer than that (the error log shows no recovered transaction being rolled back; the
    holder is not identified yet), were deferred and checked again by the sweep: at most each
    worker's batch in hand, never written twice.
    """
    cluster = Cluster(tmp_path, procs, mysql_extra=("--innodb-flush-log-at-trx-commit=1",))
    try:
        cluster.start()
        cluster.pause(2)
        cluster.conn.close()
        cluster.mysql.kill()  # a crash, not a clean shutdown: InnoDB recovers on start
        cluster.note("kill -9 mariadbd")
        down = 2.0
        cluster.pause(down)
        cluster.mysql.start()
        cluster.note("mariadbd back")
        cluster.conn = cluster.mysql.connect("recheck")
        s = cluster.settings
        # Down time + reconnect backoff + crash recovery on start + a sweep.
        bound = down + MAX_BACKOFF + 3.0 + s.deployment.sweep_grace + s.deployment.sweep_interval
        report = cluster.finish("MariaDB killed and restarted")  # until every row due is written again
        # Each worker's batch in hand may wait PATIENT_LOCK_WAITS more lock waits (1 s each).
        report.assert_invariants(
            bound_s=bound + PATIENT_LOCK_WAITS, max_duplicates=len(cluster.workers) * s.worker_batch
        )
    finally:
        cluster.close()


def test_a_paused_worker_is_reclaimed_and_its_late_write_changes_nothing(cluster):
    cluster.start(workers=2)
    keys = Keys(cluster.settings.deployment.key_prefix)
    rds = cluster.redis.client()
    # A worker with a slow check, so that it is paused while it holds a batch.
    victim = cluster.start_worker(env={"RECHECK_CHECK": "tests.support.checks:slow", "TEST_CHECK_SLEEP": "1"})

    def victim_holds():
        ids = [w.decode() for w in rds.smembers(keys.workers) if f"-{victim.pid}-" in w.decode()]
        held = rds.smembers(keys.processing(ids[0])) if ids else set()
        return held if len(held) >= 10 else None

    held = wait_for(victim_holds, 20, "the slow worker to hold a batch of 10 or more")
    victim.send_signal(signal.SIGSTOP)
    cluster.note(f"SIGSTOP worker pid {victim.pid} holding {len(held)} ids")
    held_ids = [item.id for item in parse_entries(list(held))[0]]
    marks = ",".join(["%s"] * len(held_ids))
    rechecked = f"SELECT COUNT(*) FROM audit WHERE old_due >= %s AND row_id IN ({marks})"
    paused_at = scalar(cluster.conn, "SELECT NOW(3)")
    wait_for(lambda: scalar(cluster.conn, rechecked, (paused_at, *held_ids)) >= len(held_ids), 15,
             "the paused worker's ids to be checked by others")  # fmt: skip
    cluster.note("its ids were reclaimed and checked by the other workers")
    victim.send_signal(signal.SIGCONT)
    cluster.note("SIGCONT: it finishes its check and writes back late")
    report = cluster.finish("worker paused past its heartbeat, then resumed")
    log = cluster.procs.log_of(victim)
    stale = int(log.split(" stale")[0].rsplit(" ", 1)[-1]) if " stale" in log else -1
    cluster.note(f"the resumed worker's late write was fenced out: {stale} stale rows")
    assert stale >= len(held_ids), log
    s = cluster.settings
    # The paused batch was checked twice: once by the paused worker (fenced out), once by others.
    report.assert_invariants(bound_s=worker_bound(s) + 1.0, max_duplicates=2 * s.worker_batch)


def test_connections_cut_from_the_server_side(cluster):
    cluster.start()
    rds = cluster.redis.client()
    admin = cluster.mysql.connect()
    for round_ in range(10):
        cluster.pause(1.0)
        killed_redis = rds.client_kill_filter(_type="normal", skipme=True)
        with admin.cursor() as cursor:
            cursor.execute(
                "SELECT ID FROM information_schema.PROCESSLIST WHERE DB = 'recheck' AND ID <> CONNECTION_ID()"
            )
            ids = [row[0] for row in cursor.fetchall()]
            for connection_id in ids:
                with contextlib.suppress(pymysql.err.MySQLError):  # it may have gone meanwhile
                    cursor.execute("KILL %s", (int(connection_id),))
        cluster.note(f"round {round_}: CLIENT KILL x{killed_redis}, MySQL KILL x{len(ids)}")
    cluster.conn = cluster.mysql.connect("recheck")  # the harness's own connection was cut too
    report = cluster.finish("connections cut from the server side x10 (Redis CLIENT KILL, MySQL KILL)")
    s = cluster.settings
    report.assert_invariants(
        bound_s=MAX_BACKOFF + s.deployment.sweep_grace + s.deployment.sweep_interval, max_duplicates=0
    )
