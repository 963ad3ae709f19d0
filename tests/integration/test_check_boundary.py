"""The check boundary (issue 21): whatever a check raises or returns, only its rows fail; never a
worker, a lane or the run.

Each test failed on the code before the fix: a check's sys.exit() or KeyboardInterrupt ended
its workload's lane silently while the process heartbeated on (0 of 100 rows checked), one
row's sys.exit(2) stopped a whole `recheck run` as if it were bad configuration, a huge
Recheck(after=) crashed the worker at every write-back.
"""

from __future__ import annotations

import signal
import time

from recheck.commands.init_db import init_db
from recheck.workers.worker import Worker
from tests.support import checks
from tests.support.helpers import dispatch_all, make_store, query, recheck, scalar, seed_rows, workload
from tests.support.servers import wait_for

BOUNDARY = """
[workloads.batchy]
table = "batchy"
interval = 2
worker_batch = 10
worker_take_max = 10
check = "tests.support.checks:exits_for_some"

[workloads.rowy]
table = "rowy"
interval = 2
check = "tests.support.checks:row_exits"
concurrency = 8

[workloads.asyncy]
table = "asyncy"
interval = 2
check = "tests.support.checks:async_row_exits"
concurrency = 8
"""


def attempted(sql, table: str) -> tuple[int, int, int]:
    """(rows checked at least once, rows failing, rows never attempted)."""
    return query(
        sql,
        f"SELECT SUM(check_count > 0), SUM(fail_count > 0), SUM(check_count = 0 AND fail_count = 0) "
        f"FROM `{table}`",
    )[0]


def test_sys_exit_and_keyboard_interrupt_from_checks_fail_only_their_rows(settings, sql, tmp_path, procs):
    """One worker process, three lanes: a batch check whose calls exit or are interrupted, a plain
    per-row check and an async one whose rows do. Every lane keeps checking, the process lives."""
    (tmp_path / "recheck.toml").write_text(BOUNDARY)
    env = {"RECHECK_CONFIG": str(tmp_path / "recheck.toml")}
    base = settings.evolve(**{"config": str(tmp_path / "recheck.toml")})
    for name in ("batchy", "rowy", "asyncy"):
        table = workload(base, name, table=name)
        assert init_db(table, apply=False, say=lambda _: None, create=True) == 0
        seed_rows(table, 100, due_now=True)
    worker = procs.start("worker", settings, env=env)
    procs.start("dispatcher", settings, env=env)

    def all_attempted() -> bool:
        return all(attempted(sql, table)[2] == 0 for table in ("batchy", "rowy", "asyncy"))

    wait_for(all_attempted, 20, "every row of every workload to be attempted")
    time.sleep(2 * settings.interval)  # another round: the lanes keep going
    assert worker.poll() is None, procs.log_of(worker)
    errors = dict(query(sql, "SELECT user_id, last_error FROM rowy WHERE fail_count > 0"))
    assert set(errors) == {7, 8, 9}, errors  # only their own rows fail
    assert errors[7] == "SystemExit: 2" and errors[8] == "KeyboardInterrupt" and errors[9] == "GeneratorExit"
    async_errors = dict(query(sql, "SELECT user_id, last_error FROM asyncy WHERE fail_count > 0"))
    assert set(async_errors) == {7, 8, 9} and async_errors[9] == "CancelledError", async_errors
    # The batch check fails its whole call: the batches holding 5 and 6 fail, the others succeed.
    reasons = {row[0] for row in query(sql, "SELECT DISTINCT last_error FROM batchy WHERE fail_count > 0")}
    assert reasons <= {"SystemExit: 2", "KeyboardInterrupt"} and reasons, reasons
    assert scalar(sql, "SELECT COUNT(*) FROM batchy WHERE check_count >= 2") >= 80
    assert scalar(sql, "SELECT COUNT(*) FROM rowy WHERE check_count >= 2") == 97
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=15) == 0


def test_a_lane_that_dies_stops_its_worker_and_hands_back_what_it_held(settings, tmp_path):
    """recheck's own fault in one lane (here injected: a checks' faults cannot end a lane any more)
    is never silent: the process stops, its health file goes, the lane's batch goes back to the
    queue at once, and the worker exits 1 for a fresh process."""
    first = workload(settings, "first", table="first_rows", health_file=str(tmp_path / "health"))
    second = workload(first, "second", table="second_rows")
    for w in (first, second):
        assert init_db(w, apply=False, say=lambda _: None, create=True) == 0
        seed_rows(w, 50, due_now=True)
        dispatch_all(w)
    worker = Worker([first, second])
    broken = worker.lane("second")

    def process(entries):
        raise RuntimeError("a bug in recheck itself, mid-batch")

    broken.batch.process = process
    worker.run()  # returns once the dead lane has stopped the process
    assert worker.fatal and "workload second: its loop" in worker.fatal
    assert not (tmp_path / "health").exists()  # `recheck health` fails at once, not after a TTL
    store = make_store(second)
    assert store.queue_depth() == 50 and store.held_count(worker.id) == 0  # handed back, not held


def test_one_rows_exit_code_2_never_stops_the_run(make_settings, sql, tmp_path):
    """A per-row check's sys.exit(2) fails its row; a check that kills its worker with code 2
    after it started is a crash (restarted), not "bad configuration" (the run went on)."""
    settings = make_settings(interval=2.0)
    seed_rows(settings, 300, due_now=True)
    env = {"RECHECK_CHECK": "tests.support.checks:dies_with_2_once", "TEST_CHECK_RECORD": str(tmp_path)}
    # Two worker starts and a reclaim (the first worker dies holding its batch) within --duration,
    # counted from the first start: 8 s was too short once under the parallel phase's load.
    result = recheck("run", "--workers", "1", "--duration", "15", settings=settings, env=env, timeout=90)
    output = result.stdout + result.stderr
    assert "worker 0 exited with code 2" in result.stderr and "restarting" in result.stderr, output
    assert "bad configuration" not in output and result.returncode != 2, output
    assert (tmp_path / "died-once").exists()
    assert scalar(sql, "SELECT COUNT(*) FROM user_block_status WHERE check_count = 0 AND user_id <> 14") == 0
    assert query(sql, "SELECT last_error FROM user_block_status WHERE user_id = 14")[0][0] == "SystemExit: 2"


def test_recheck_after_any_number_is_clamped_never_a_crash(settings, make_worker, sql):
    far = workload(settings, "far", table="far", min_interval=2, max_interval=100, jitter=0)
    assert init_db(far, apply=False, say=lambda _: None, create=True) == 0
    seed_rows(far, 9, due_now=True)
    plan = {1: 1e303, 2: 10**400, 3: float("inf"), 4: -5, 5: -(10**400), 6: 7}
    plan |= {7: float("nan"), 8: True, 9: "5"}  # not numbers of seconds: their rows fail

    def decide(ids):
        return [checks.Recheck("x", after=plan[i]) for i in ids]

    worker = make_worker(far, decide)
    dispatch_all(far)
    worker.lane(far.name).poll()  # crashed with OverflowError in the write-back before the fix
    rhythm = "ROUND(TIMESTAMPDIFF(MICROSECOND, checked_at, next_check_at) / 1e6)"
    due_in = dict(query(sql, f"SELECT user_id, {rhythm} FROM far WHERE check_count = 1"))
    assert {k: float(v) for k, v in due_in.items()} == {1: 100, 2: 100, 3: 100, 4: 2, 5: 2, 6: 7}
    failed = dict(query(sql, "SELECT user_id, last_error FROM far WHERE fail_count = 1"))
    assert set(failed) == {7, 8, 9} and all("is not a number of seconds" in e for e in failed.values())
