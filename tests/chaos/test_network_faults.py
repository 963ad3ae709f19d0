"""Network faults and refusals, not process faults: one process cut off from one server, a slow
network, application row locks, a read-only failover. Each judged from MySQL by the audit
invariants (tests/support/cluster.py). Run with `-s` to see each fault's figures.

The faults go through tests/support/faultproxy.py, which sits between one process and one
server: stall() is a partition (nothing passes, connections stay open), reset() + refuse() a
dead path (connections cut, new ones reset).
"""

from __future__ import annotations

import signal
import time

import pytest

from recheck.shared.mysql.db import LOCK_WAIT_SECONDS
from recheck.shared.outage import MAX_BACKOFF
from recheck.shared.process.loop import ABANDON_TIMEOUT, WATCHDOG_GRACE
from recheck.shared.redis.keys import Keys
from tests.support.cluster import Cluster
from tests.support.helpers import scalar
from tests.support.processes import SCHEDULING_SLACK_S
from tests.support.servers import wait_for

ROW_COST = {"TEST_CHECK_ROW_COST": "0.001"}  # 0.2 s per batch of 200: a worker is caught holding one


def held(cluster: Cluster, process) -> int:
    return cluster.held_by(process)


def least_heartbeat_ttl(cluster: Cluster, seconds: float) -> int:
    """The least time to live any registered worker's heartbeat key had (PTTL, in ms; -2 if one
    was missing) over `seconds`, sampled every 10 ms straight from Redis."""
    store = cluster.store()
    beats = [store.presence_keys("worker", worker)[0] for worker in store.worker_ids()]
    assert beats, "no worker registered"
    least, deadline = 10**9, time.monotonic() + seconds
    while time.monotonic() < deadline:
        pipe = store.client.pipeline(transaction=False)
        for key in beats:
            pipe.pttl(key)
        least = min(least, *pipe.execute())
        time.sleep(0.01)  # sampling period
    return least


def give_back_bound(s) -> float:
    """A write-back that cannot land goes back after HEARTBEAT_TTL + one lock wait, seen by the
    next heartbeat, then another worker checks it (a batch of 200 at 1 ms a row)."""
    return s.deployment.heartbeat_ttl + LOCK_WAIT_SECONDS + s.deployment.heartbeat_interval + 0.5


def takeover_bound(s) -> float:
    """A leader that cannot read MySQL (or reach Redis) lets its lease go within LEADER_TTL; a
    standby takes it at its next heartbeat and dispatches from the oldest due row."""
    return s.deployment.leader_ttl + 2 * s.deployment.heartbeat_interval + SCHEDULING_SLACK_S


def start_victim_behind(cluster: Cluster, server: str):
    """Two workers, and a third (the victim) reaching `server` through a proxy, holding a batch."""
    cluster.start(workers=2, check="tests.support.checks:row_cost", env=ROW_COST)
    proxy = cluster.proxy(server)
    victim = cluster.start_worker(env=cluster.env_through(**{server: proxy}))
    wait_for(lambda: held(cluster, victim) > 0, 15, "the victim to hold a batch")
    return proxy, victim


def test_a_worker_partitioned_from_mysql_gives_its_batch_back_and_stops_in_time(cluster):
    proxy, victim = start_victim_behind(cluster, "mysql")
    s = cluster.settings
    proxy.stall()  # its write-back now hangs in a read with nothing coming back
    holding = cluster.held_entries(victim)
    late = cluster.lateness_of(holding)
    cluster.note(f"partition worker pid {victim.pid} from mysql ({len(holding)} ids held, {late:.2f} s late)")
    wait_for(lambda: "gave them back" in cluster.procs.log_of(victim), 10, "the batch to be given back")
    cluster.note("its batch was given back for the other workers")
    assert victim.poll() is None  # alive, heartbeating, but no longer holding work hostage
    stopped = time.monotonic()
    victim.send_signal(signal.SIGTERM)  # and a graceful stop ends in time, whatever MySQL does
    code = victim.wait(timeout=30)
    took = time.monotonic() - stopped
    cluster.note(f"SIGTERM while partitioned: exited {code} after {took:.1f} s")
    assert took < s.deployment.shutdown_timeout + WATCHDOG_GRACE + ABANDON_TIMEOUT + 1, took
    proxy.heal()
    report = cluster.finish("one worker partitioned from MySQL (stalled), then stopped", exited=(victim,))
    # The bound counts from the fault: the batch was already `late` then (0.4-0.5 s on a quiet
    # machine, where the run's worst was 2.9-3.1 s), plus the suite's slack for a loaded machine
    # (a CI runner with neighbours reached 3.39 s against a fixed 3.25 s that did not count it).
    bound = late + give_back_bound(s) + SCHEDULING_SLACK_S
    report.assert_invariants(bound_s=bound, max_duplicates=2 * s.worker_batch)


def test_a_worker_partitioned_from_redis_is_reclaimed_like_a_dead_one(cluster):
    proxy, victim = start_victim_behind(cluster, "redis")
    s = cluster.settings
    proxy.stall()
    cluster.note(f"partition worker pid {victim.pid} from redis")
    cluster.pause(5)
    proxy.heal()
    cluster.note("partition healed")
    report = cluster.finish("one worker partitioned from Redis (stalled) for 5 s")
    # The suite's slack for the processes themselves, as the other bounds here (a fixed 1.0 s was
    # passed by 0.47 s on a VM half as fast, 2026-11-30); a worker never reclaimed is 5 s late.
    bound = s.deployment.heartbeat_ttl + s.deployment.heartbeat_interval + s.deployment.reclaim_interval
    report.assert_invariants(bound_s=bound + SCHEDULING_SLACK_S, max_duplicates=2 * s.worker_batch)


def start_leader_behind(cluster: Cluster, server: str):
    """A leading dispatcher reaching `server` through a proxy, and a standby reaching it directly."""
    proxy = cluster.proxy(server)
    cluster.start(workers=3, dispatcher_env=cluster.env_through(**{server: proxy}))
    leader = cluster.dispatchers[0]
    keys = Keys(cluster.settings.deployment.key_prefix)
    assert cluster.holder_of([leader], keys.leader)
    standby = cluster.start_dispatcher()
    wait_for(lambda: "dispatcher" in cluster.procs.log_of(standby), 15, "the standby to start")
    cluster.pause(1)
    return proxy, leader, standby


def assert_standby_takes_over(cluster: Cluster, leader, standby) -> float:
    keys = Keys(cluster.settings.deployment.key_prefix)
    cut = time.monotonic()
    wait_for(lambda: cluster.holder_of([standby], keys.leader), 20, "the standby to take the lease")
    takeover = time.monotonic() - cut
    cluster.note(f"standby leads {takeover:.2f} s after the cut")
    assert takeover < takeover_bound(cluster.settings) + MAX_BACKOFF, takeover
    return takeover


def cut_the_leader_off(cluster: Cluster, server: str, cut):
    """Cut the leading dispatcher's path to `server` (cut(proxy)), see the standby take over,
    heal the path 3 s later; the report, and the leader's process."""
    proxy, leader, standby = start_leader_behind(cluster, server)
    cut(proxy)
    cluster.note(f"leader's path to {server} cut")
    assert_standby_takes_over(cluster, leader, standby)
    cluster.pause(3)
    proxy.heal()
    return cluster.finish(f"the leading dispatcher cut off from {server}"), leader


CUT_MYSQL = {
    # A dead path: its connections are cut, new ones reset (the loop sees errors: an outage).
    "dead": lambda proxy: (proxy.reset(), proxy.refuse()),
    # A silent path: nothing answers, nothing fails; the page under way waits for MySQL's read
    # timeout (60 s). The lease is renewed on a thread of its own, which must not renew for a
    # loop that makes no progress.
    "silent": lambda proxy: proxy.stall(),
}


@pytest.mark.parametrize("path", CUT_MYSQL)
def test_a_leader_cut_off_from_mysql_lets_its_lease_go_and_the_standby_leads(tmp_path, procs, path):
    # A lease longer than the outage backoff (as by default: 5 s and 2 s), so that only giving
    # the lease up, not a renewal missed during a backoff, can hand it over.
    cluster = Cluster(tmp_path, procs, leader_ttl=3.0)
    try:
        report, leader = cut_the_leader_off(cluster, "mysql", CUT_MYSQL[path])
        assert "giving up the lease" in cluster.procs.log_of(leader)
        s = cluster.settings
        report.assert_invariants(bound_s=takeover_bound(s) + MAX_BACKOFF + 0.5, max_duplicates=0)
    finally:
        cluster.close()


def test_the_leader_of_an_idle_table_cut_off_silently_from_mysql_lets_its_lease_go(tmp_path, procs):
    """An empty table: its workload is quiet, so the dispatch loop reads MySQL through the idle
    probe (dispatcher/idle.py), not a page. A probe waiting on a silent MySQL is no progress
    either: the lease must go as it does for a page (before the fix: renewed for the 60 s read
    timeout)."""
    cluster = Cluster(tmp_path, procs, rows=0, leader_ttl=3.0)
    try:
        proxy, leader, standby = start_leader_behind(cluster, "mysql")
        proxy.stall()
        assert_standby_takes_over(cluster, leader, standby)
        assert "giving up the lease" in cluster.procs.log_of(leader)
        proxy.heal()
    finally:
        cluster.close()


def test_a_leader_cut_off_from_redis_loses_its_lease_and_the_standby_leads(cluster):
    report, _ = cut_the_leader_off(cluster, "redis", lambda proxy: proxy.stall())
    s = cluster.settings
    report.assert_invariants(bound_s=takeover_bound(s) + 0.5, max_duplicates=0)


def test_200ms_more_latency_on_every_connection(tmp_path, procs):
    # 1,000 rows every 2 s with 4 workers and fixed takes of 200. What this test guards is that
    # slowness is not taken for death: no lease lost, no batch given back, so not a single
    # duplicate check. Lateness is not a count of round trips here: with 0.4 s on each, two
    # write slots pass 200-row write-backs to each other at about 200-250 rows/s (a slot's take,
    # the write, its give-back and the waiter's wake-up are each a round trip), below the 500 rows/s
    # falling due, so a backlog builds for as long as the fault lasts. Measured on 2026-11-25 with
    # 10 s of it: 3.3-8.3 s (024be18: 4.2-4.9 s); the bound is the fault's length plus 8 round trips.
    fault_s = 5.0  # five heartbeat TTLs of slowness
    cluster = Cluster(tmp_path, procs, rows=1000, leader_ttl=3.0)
    try:
        cluster.start(workers=4, proxied=True)
        cluster.note("all connections through proxies")
        for proxy in cluster.proxies:
            proxy.set_latency(0.2)
        cluster.note("+200 ms each way on every MySQL and Redis connection")
        # Every worker's heartbeat key watched from outside the proxies while it lasts: how close
        # it came to expiring (the reclaimer looks only every 0.25 s).
        least_ms = least_heartbeat_ttl(cluster, seconds=fault_s)
        for proxy in cluster.proxies:
            proxy.heal()
        cluster.note(f"latency gone; the workers' heartbeat keys had {least_ms} ms left at the least")
        report = cluster.finish(f"200 ms latency on every connection for {fault_s:g} s")
        # Leases are renewed from the scheduler's thread: from the dispatch loop, a page of several
        # round trips plus a beat outlasted the 3 s lease and the leader was deposed (CI, 10.0 s late).
        leader_log = cluster.procs.log_of(cluster.dispatchers[0])
        for lost in ("deposed", "lost the lease", "giving up the lease"):
            assert lost not in leader_log, f"slowness was taken for death: {lost}"
        report.assert_invariants(bound_s=fault_s + 8 * 0.4, max_duplicates=0)
        # A round of beats every 0.25 s, each one round trip of 0.4 s (the write slots have a
        # thread of their own): SETs 0.4 s apart, 0.6 s before a 1 s TTL runs out. They landed
        # 1.05 s apart when the slot's renewal shared the round and a whole pause followed it:
        # keys gone between them, live workers reclaimed.
        assert least_ms > 0, f"a live worker's heartbeat key expired ({least_ms})"
    finally:
        cluster.close()


def test_rows_the_application_holds_locked_are_checked_once_released(tmp_path, procs):
    # The server's own lock wait as short as recheck's (as in the report this test comes from):
    # whatever recheck's sessions say, a lock held longer must not crash or quarantine anything.
    cluster = Cluster(tmp_path, procs, mysql_extra=("--innodb-lock-wait-timeout=1",))
    try:
        cluster.start()
        s = cluster.settings
        app = cluster.mysql.connect("recheck")
        hold = 5.0
        locked = "user_id IN (10, 2500, 4990)"
        with app.cursor() as cursor:
            cursor.execute("BEGIN")
            cursor.execute(f"SELECT user_id FROM user_block_status WHERE {locked} FOR UPDATE")
            cluster.note(f"application locks 3 rows for {hold:g} s (lock wait {LOCK_WAIT_SECONDS} s)")
            cluster.pause(hold)
            cursor.execute("ROLLBACK")
        app.close()
        cluster.note("locks released")
        report = cluster.finish("an application holding row locks longer than the lock wait")
        later = "SELECT COUNT(*) FROM audit WHERE row_id IN (10, 2500, 4990) AND written_at > %s"
        assert scalar(cluster.conn, later, (cluster.baseline,)) > 0  # checked again after the locks went
        bound = hold + LOCK_WAIT_SECONDS + s.deployment.sweep_grace + s.deployment.sweep_interval + s.interval
        report.assert_invariants(bound_s=bound, max_duplicates=10)
    finally:
        cluster.close()


def test_a_read_only_failover_is_waited_out(cluster):
    cluster.start()
    admin = cluster.mysql.connect()
    down = 5.0  # five times the heartbeat TTL: long enough for any give-back or lease loss to show
    with admin.cursor() as cursor:
        cursor.execute("SET GLOBAL read_only = 1")
        cluster.note(f"mysql read-only for {down:g} s")
        cluster.pause(down)
        cursor.execute("SET GLOBAL read_only = 0")
    admin.close()
    cluster.note("mysql takes writes again")
    report = cluster.finish(f"MySQL read-only for {down:g} s")
    for process in cluster.workers:
        log = cluster.procs.log_of(process)
        assert log.count("mysql refuses writes") == 1, log[-3000:]
        assert "Traceback" not in log
    assert all(process.returncode == 0 for process in cluster.workers)  # no worker died
    # Nobody could write, so nobody handed a batch round (that would only check it again and
    # again): each batch in hand was written once, after; every row within the bound.
    report.assert_invariants(bound_s=down + MAX_BACKOFF + 1.5, max_duplicates=0)
