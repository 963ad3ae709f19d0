"""An idle deployment costs little (issue 50, item 1): the dispatcher asks every idle workload on
a server whether a row is due in one statement (dispatcher/idle.py) and reads the asked lists
when the deployment's bell rings (dispatcher/asked.py), not per workload twenty times a second.
What must not change: a row committed due now, in any of the tables, and an id asked for, still
go out at once, and a late commit behind a quiet cursor is still found. Real MariaDB and Redis.
"""

from __future__ import annotations

import threading
import time

from recheck import Client
from recheck.commands.init_db import init_db
from recheck.dispatcher.monitor import REST_EVERY, Monitor
from recheck.shared.mysql.db import Database
from recheck.shared.mysql.probe import DueProbe, due_part
from recheck.shared.process.metrics import dispatcher_metrics
from tests.support.helpers import make_dispatcher, make_store, query, scalar, take_lease, workload
from tests.support.servers import wait_for


def one_shot_tables(settings, *names: str):
    """One-shot workloads of the same deployment, each on an empty table of its own."""
    made = []
    for name in names:
        w = workload(settings, name, table=f"jobs_{name}", once=True, check_kind="batch")
        assert init_db(w, apply=True, create=True, say=lambda _: None) == 0
        made.append(w)
    return made


def test_the_probe_names_exactly_the_workloads_with_a_row_due_now(make_settings, sql):
    a, b, c = one_shot_tables(make_settings(), "a", "b", "c")
    query(
        sql, "INSERT INTO jobs_a (user_id, next_check_at) VALUES (1, NULL), (2, '9999-12-30')"
    )  # done, paused
    query(sql, "INSERT INTO jobs_b (user_id, next_check_at) VALUES (1, NOW(3) - INTERVAL 1 SECOND)")
    query(sql, "INSERT INTO jobs_c (user_id, next_check_at) VALUES (1, NOW(3) + INTERVAL 1 HOUR)")
    passes = [make_dispatcher(w) for w in (a, b, c)]
    probe = DueProbe(Database(a))
    try:
        parts = [due_part(one.pusher.rows.queries, one.probe_from()) for one in passes]
        assert probe.due(parts) == {1}  # b's row alone: not done, not parked, not in an hour
        query(sql, "UPDATE jobs_c SET next_check_at = NOW(3)")
        assert probe.due(parts) == {1, 2}
        assert probe.statement(parts) is probe.statement(parts)  # written once while idle
        later = passes[1].probe_from()[0] + 1
        moved = [parts[0], due_part(passes[1].pusher.rows.queries, (later, None)), parts[2]]
        assert probe.statement(moved) != probe.statement(parts)
        assert probe.due([]) == set()
    finally:
        probe.close()


def test_a_quiet_one_shot_pass_probes_its_look_back_window_so_a_late_commit_is_found(make_settings, sql):
    """A producer's row takes its due time when its INSERT runs and is seen at its commit: one
    committed late lands behind the cursor, where look_back reads it. A probe from the cursor
    alone would never see it while the table is otherwise idle: the probe reads the window too."""
    (jobs,) = one_shot_tables(make_settings(), "late")
    take_lease(jobs)
    one = make_dispatcher(jobs)
    query(
        sql, "INSERT INTO jobs_late (user_id, next_check_at) VALUES (1, NOW(3) - INTERVAL 100000 MICROSECOND)"
    )
    one.poll()
    assert not one.quiet  # it read row 1
    one.poll()  # row 1 is in flight: the look-back reads it again (dedup drops it)
    assert not one.quiet
    query(sql, "UPDATE jobs_late SET next_check_at = NULL WHERE user_id = 1")  # done
    one.poll()
    assert one.quiet
    cursor_due_ms = one.cursor[0]
    assert one.probe_from() == (cursor_due_ms - round(jobs.deployment.sweep_grace * 1000), None)
    # The late commit: due half a grace before the cursor's row.
    late_us = (cursor_due_ms - round(jobs.deployment.sweep_grace * 500)) * 1000  # on the due times' own epoch
    late = f"TIMESTAMP'1970-01-01 00:00:00' + INTERVAL {late_us} MICROSECOND"
    query(sql, f"INSERT INTO jobs_late (user_id, next_check_at) VALUES (2, {late})")
    probe = DueProbe(Database(jobs))
    try:
        queries = one.pusher.rows.queries
        assert probe.due([due_part(queries, one.cursor)]) == set()  # what the cursor alone would miss
        assert probe.due([due_part(queries, one.probe_from())]) == {0}
    finally:
        probe.close()
    one.poll()
    assert make_store(jobs).in_flight([b"2"]) == [b"2"]  # the woken poll's look-back queued it


def test_a_recurring_pass_is_not_woken_by_the_row_it_has_just_read_but_by_one_after_it(make_settings, sql):
    """A recurring workload's last row read is still in flight at the cursor: a probe from the
    cursor's due time with every key would wake the pass each round for nothing (a probe and a
    poll instead of a poll). The probe reads strictly after the cursor, keys included: a row
    committed later at the very same due time with a larger key is found."""
    settings = make_settings(interval=3600)
    take_lease(settings)
    one = make_dispatcher(settings)
    query(
        sql, "INSERT INTO user_block_status (user_id, next_check_at) VALUES (5, NOW(3) - INTERVAL 1 SECOND)"
    )
    one.poll()
    one.poll()
    assert one.quiet and one.cursor[1] == 5  # row 5 read, in flight, its due time unchanged in MySQL
    probe = DueProbe(Database(settings))
    try:
        queries = one.pusher.rows.queries
        assert probe.due([due_part(queries, one.probe_from())]) == set()
        query(sql, "INSERT INTO user_block_status (user_id, next_check_at) "
                   "SELECT 6, next_check_at FROM user_block_status WHERE user_id = 5")  # fmt: skip
        assert probe.due([due_part(queries, one.probe_from())]) == {0}
        query(sql, "DELETE FROM user_block_status WHERE user_id = 6")
        query(sql, "INSERT INTO user_block_status (user_id, next_check_at) "
                   "SELECT 4, next_check_at FROM user_block_status WHERE user_id = 5")  # fmt: skip
        assert probe.due([due_part(queries, one.probe_from())]) == set()  # before the cursor: the sweep's
    finally:
        probe.close()


def test_the_monitor_samples_a_workload_at_rest_every_few_seconds_and_at_once_when_busy(make_settings, sql):
    settings = make_settings()
    store = make_store(settings)
    now, busy = [100.0], [False]
    monitor = Monitor(settings, Database(settings), store, dispatcher_metrics(),
                      busy=lambda: busy[0], clock=lambda: now[0])  # fmt: skip
    assert monitor.run_once() is not None  # an empty table: at rest
    now[0] += REST_EVERY / 2
    assert monitor.run_once() is None
    busy[0] = True  # its dispatcher found work: sampled at once
    assert monitor.run_once() is not None
    busy[0] = False
    now[0] += REST_EVERY
    query(sql, "INSERT INTO user_block_status (user_id, next_check_at) VALUES (1, NOW(3))")
    store.client.delete(store.keys.freshness)  # the deployment's shared sample serves for 1 s of real time
    assert monitor.run_once().due_now == 1  # the rest is over: no longer at rest
    now[0] += 0.1
    assert monitor.run_once() is not None  # sampled every run while not at rest


def test_asking_rings_the_deployments_bell_whichever_workload_asks(make_settings):
    a, b = one_shot_tables(make_settings(), "a", "b")
    store_a, store_b = make_store(a), make_store(b)
    last = store_a.last_asked_ring()
    assert store_a.wait_for_asked(last, 0.05) == last  # nothing rang: the wait times out
    threading.Timer(0.2, lambda: store_b.ask([b"7"])).start()
    waited = time.monotonic()
    rung = store_a.wait_for_asked(last, 10.0)
    assert rung != last and time.monotonic() - waited < 5.0
    assert store_b.take_asked(10) == ([b"7"], False)
    assert store_a.take_asked(10) == ([], False)


def test_idle_job_tables_still_start_a_new_job_and_an_asked_id_at_once(make_settings, sql, procs, tmp_path):
    """Three idle one-shot workloads, one dispatcher and one worker: a job inserted into each table
    in turn, and an id asked for with Client.now, are checked within a couple of seconds on a
    busy machine (an idle_poll_interval and a blocking take, measured ~50-90 ms: bench --mode idle).
    The production default of idle_poll_interval, not the tests' short one."""
    settings = make_settings(idle_poll_interval=0.08)
    names = ("one", "two", "three")
    tables = one_shot_tables(settings, *names)
    config = tmp_path / "recheck.toml"
    config.write_text("".join(
        f'[workloads.{name}]\ntable = "jobs_{name}"\nonce = true\ncheck = "tests.support.checks:ok"\n'
        'check_kind = "batch"\n' for name in names))  # fmt: skip
    env = {"RECHECK_CONFIG": str(config)}
    procs.wait_started(procs.start("dispatcher", settings, env=env))
    procs.wait_started(procs.start("worker", settings, env=env))
    time.sleep(1.0)  # every lane quiet: the probe and the bell are what remain
    for number, name in enumerate(names, start=1):
        query(sql, f"INSERT INTO jobs_{name} (user_id) VALUES ({number})")
        inserted = time.monotonic()
        wait_for(
            lambda name=name: scalar(sql, f"SELECT check_count FROM jobs_{name}") == 1, 10, f"{name}'s job"
        )
        assert time.monotonic() - inserted < 3.0
    # An id asked for on a quiet deployment: a row of "two" made due in an hour, then asked for.
    query(sql, "INSERT INTO jobs_two (user_id, next_check_at) VALUES (20, NOW(3) + INTERVAL 1 HOUR)")
    time.sleep(0.5)
    client = Client(settings=tables[1])
    asked = time.monotonic()
    assert client.now([20]).done == [20]
    wait_for(lambda: scalar(sql, "SELECT check_count FROM jobs_two WHERE user_id = 20") == 1, 10, "row 20")
    took = time.monotonic() - asked
    client.close()
    assert took < 3.0, f"an asked id took {took:.2f} s: the bell did not wake the dispatcher"
