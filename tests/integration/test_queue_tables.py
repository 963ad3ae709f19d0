"""One-shot workloads (issue 34): the seed articles' job tables run on recheck, each row handled
once, enqueued by a plain INSERT, retried, parked dead, put back.

The three tables as the articles write them: `job_queue` (status 0 pending, 1 processing, 2
finished), `unsent_emails` (status 'unsent' / 'claimed' / 'sent'), `message_queue` (deleted when
handled). Real dispatcher and worker processes where timing matters, in-process lanes where the
steps are the point. Before issue 34 a handled row was due again after its interval: every job
ran again and again.
"""

from __future__ import annotations

import collections
import json
import signal
import threading
import time

import pymysql
import pytest

from recheck import Client
from recheck.shared.mysql.db import Database
from tests.support import checks
from tests.support.helpers import drain, make_store, query, recheck, scalar, workload
from tests.support.servers import wait_for

JOB_QUEUE = ("CREATE TABLE job_queue (id INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, "
             "status TINYINT(1) DEFAULT 0, data BLOB) ENGINE=InnoDB")  # fmt: skip
UNSENT_EMAILS = ("CREATE TABLE unsent_emails (id INT NOT NULL PRIMARY KEY AUTO_INCREMENT, "
                 "status ENUM('unsent','claimed','sent'), owner INT UNSIGNED NOT NULL DEFAULT 0, "
                 "ts TIMESTAMP, KEY (owner, status, ts))")  # fmt: skip
MESSAGE_QUEUE = ("CREATE TABLE message_queue (id BIGINT PRIMARY KEY AUTO_INCREMENT, owner VARBINARY(255), "
                 "dequeued_time DATETIME, message VARBINARY(255) NOT NULL)")  # fmt: skip


def jobs(settings, table: str, **values):
    """A one-shot workload on an application's table, its id column `id`, recheck's result in a
    column of its own unless the test adopts the application's."""
    values = {"check_kind": "batch", "result_column": "recheck_result", **values}
    return workload(settings, table, table=table, id_column="id", once=True, **values)


def create(settings, create_sql: str, *rows_sql: str, adopt: tuple[str, ...] = ()) -> None:
    """The application's table as it was, with rows, then `init-db --apply` (the adoption)."""
    db = Database(settings)
    db.execute(create_sql)
    for statement in rows_sql:
        db.execute(statement)
    db.close()
    args = ["init-db", "--apply", *(a for name in adopt for a in ("--adopt", name))]
    applied = recheck(*args, settings=settings)
    assert applied.returncode == 0, applied.stdout + applied.stderr


def handled(sql, table: str) -> dict:
    return {
        int(i): (int(n), status)
        for i, n, status in query(sql, f"SELECT id, check_count, status FROM {table}")
    }


def test_job_queue_pending_rows_once_finished_never_status_written(settings, sql, make_worker):
    """status 0 pending, 2 finished: init-db makes exactly the pending rows due and the others
    done; the check's result goes into the application's own status column (adopted explicitly)."""
    queue = jobs(settings, "job_queue", result_column="status", pending="status = 0")
    rows = "INSERT INTO job_queue (status, data) VALUES (0, 'a'), (2, 'b'), (0, 'c'), (2, 'd')"
    create(queue, JOB_QUEUE, rows, adopt=("status",))
    worker = make_worker(queue, lambda ids: [2] * len(ids))  # "finished"
    for _ in range(3):  # rounds: a done row never comes back
        drain(worker, queue)
    assert handled(sql, "job_queue") == {1: (1, 2), 2: (0, 2), 3: (1, 2), 4: (0, 2)}
    assert scalar(sql, "SELECT COUNT(*) FROM job_queue WHERE next_check_at IS NOT NULL") == 0
    # A producer that knows nothing of recheck: a plain INSERT, due at once.
    query(sql, "INSERT INTO job_queue (status, data) VALUES (0, 'e')")
    drain(worker, queue)
    assert handled(sql, "job_queue")[5] == (1, 2)


def test_adopting_a_queue_table_without_saying_which_rows_are_pending_is_refused(settings, sql):
    queue = jobs(settings, "job_queue")
    query(sql, JOB_QUEUE)
    query(sql, "INSERT INTO job_queue (status) VALUES (0), (2)")
    shown = recheck("init-db", "--apply", settings=queue)
    assert shown.returncode == 1 and "PENDING" in shown.stdout and "Nothing was changed" in shown.stdout
    assert scalar(sql, "SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() "
                       "AND TABLE_NAME = 'job_queue'") == 3  # fmt: skip
    taken_over = recheck("init-db", "--apply", settings=jobs(settings, "job_queue", result_column="status",
                                                             pending="status = 0"))  # fmt: skip
    assert taken_over.returncode == 1 and "did not add" in taken_over.stdout  # never silently


def finished_and_pending(sql) -> tuple[list, list]:
    """(ids done, ids due) of the job_queue table."""
    done = [int(i) for (i,) in query(sql, "SELECT id FROM job_queue WHERE next_check_at IS NULL ORDER BY id")]
    due = [
        int(i) for (i,) in query(sql, "SELECT id FROM job_queue WHERE next_check_at <= NOW(3) ORDER BY id")
    ]
    return done, due


def test_a_pending_condition_mysql_refuses_changes_nothing_and_the_corrected_one_adopts(settings, sql):
    """Issue 45, item 2: a typo in `pending` failed after the ALTER, every existing row due by the
    new column's default, and the corrected rerun said the table was ready: finished jobs ran again."""
    query(sql, JOB_QUEUE)
    query(sql, "INSERT INTO job_queue (status) VALUES (0), (2), (2), (1)")
    typo = recheck("init-db", "--apply", settings=jobs(settings, "job_queue", pending="statuss IN (0, 1)"))
    assert typo.returncode == 1 and "statuss" in typo.stdout and "Nothing was changed" in typo.stdout, (
        typo.stdout
    )
    assert scalar(sql, "SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() "
                       "AND TABLE_NAME = 'job_queue'") == 3  # fmt: skip
    fixed = recheck("init-db", "--apply", settings=jobs(settings, "job_queue", pending="status IN (0, 1)"))
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert finished_and_pending(sql) == ([2, 3], [1, 4])


def test_an_adoption_cut_short_or_applied_by_hand_runs_no_finished_job_and_is_finished_by_init_db(
    settings, sql
):
    """The ALTER as init-db prints it, applied by hand (or an adoption cut short after it): the
    existing rows and rows producers insert meanwhile wait, parked, never due by the column's
    default; the dispatcher refuses the table saying why; `init-db --apply` finishes the adoption."""
    from recheck.shared.mysql.schema import SchemaProblem, require_table

    queue = jobs(settings, "job_queue", pending="status = 0")
    query(sql, JOB_QUEUE)
    query(sql, "INSERT INTO job_queue (status) VALUES (0), (2), (2), (0)")
    shown = recheck("init-db", settings=queue)
    assert shown.returncode == 1, shown.stdout
    statement = shown.stdout.split("needs this change:", 1)[1].split(";", 1)[0]
    query(sql, statement)  # applied "yourself", as the dry run offers
    query(sql, "INSERT INTO job_queue (status) VALUES (0)")  # a producer meanwhile
    assert finished_and_pending(sql) == ([], [])  # nothing due, nothing taken as done
    looked = recheck("init-db", settings=queue)
    assert looked.returncode == 1 and "not finished" in looked.stdout, looked.stdout
    db = Database(queue)
    with pytest.raises(SchemaProblem, match="not finished"):
        require_table(queue, db)
    db.close()
    done = recheck("init-db", "--apply", settings=queue)
    assert done.returncode == 0, done.stdout + done.stderr
    assert finished_and_pending(sql) == ([2, 3], [1, 4, 5])
    query(sql, "INSERT INTO job_queue (status) VALUES (0)")  # after: due when inserted
    assert finished_and_pending(sql)[1] == [1, 4, 5, 6]
    again = recheck("init-db", settings=queue)
    assert again.returncode == 0 and "is ready" in again.stdout, again.stdout


def test_unsent_emails_are_sent_once_each(settings, sql, make_worker):
    emails = jobs(settings, "unsent_emails", result_column="status", pending="status = 'unsent'")
    rows = "INSERT INTO unsent_emails (status) VALUES ('unsent'), ('sent'), ('unsent')"
    create(emails, UNSENT_EMAILS, rows, adopt=("status",))
    sent: list = []
    worker = make_worker(emails, lambda ids: (sent.extend(ids), ["sent"] * len(ids))[1])
    for _ in range(3):
        drain(worker, emails)
    assert sorted(sent) == [1, 3]  # each unsent email once; the sent one never
    assert {status for _, (_, status) in handled(sql, "unsent_emails").items()} == {"sent"}


def test_message_queue_rows_are_deleted_when_handled_and_kept_when_they_fail(settings, sql, make_worker):
    messages = jobs(settings, "message_queue", done="delete", result_column="recheck_result", pending="true")
    create(messages, MESSAGE_QUEUE, "INSERT INTO message_queue (message) VALUES ('m1'), ('m2'), ('m3')")
    worker = make_worker(messages, lambda ids: [ValueError("bad") if i == 2 else "ok" for i in ids])
    drain(worker, messages)
    assert [int(r[0]) for r in query(sql, "SELECT id FROM message_queue")] == [2]  # the failed one waits


def test_rows_start_in_due_then_key_order_with_one_worker(settings, sql, make_worker):
    """FIFO by insertion for rows due on insert: one worker starts them in (due, id) order."""
    queue = jobs(settings, "job_queue", worker_batch=7, worker_take_max=7)
    create(queue, JOB_QUEUE)
    for n in range(40):  # one row per transaction, as producers insert them
        query(sql, "INSERT INTO job_queue (data) VALUES (%s)", (f"job {n}",))
    started: list[int] = []
    worker = make_worker(queue, lambda ids: (started.extend(ids), ["done"] * len(ids))[1])
    drain(worker, queue, rounds=50)
    assert started == sorted(started) and len(started) == 40


def test_a_failing_job_is_retried_then_dead_then_put_back(settings, sql, make_worker):
    queue = jobs(settings, "job_queue", max_attempts=3, retry_base=0.05, retry_max=0.1)
    create(queue, JOB_QUEUE)
    query(sql, "INSERT INTO job_queue (data) VALUES ('x')")
    worker = make_worker(queue, checks.always_raises)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not scalar(
        sql, "SELECT next_check_at > '9999-01-01' FROM job_queue"
    ):
        drain(worker, queue)
        time.sleep(0.05)
    due, fails, error = query(sql, "SELECT next_check_at, fail_count, last_error FROM job_queue")[0]
    assert str(due).startswith("9999-12-29") and fails == 3 and "upstream is down" in error
    facts = json.loads(recheck("status", "--json", settings=queue).stdout)["workloads"][queue.name]
    assert facts["once"] and facts["dead"] == 1 and facts["dead_ids"][0]["fails"] == 3
    assert "dead id 1 after 3 failures" in recheck("status", settings=queue).stdout
    story = recheck("inspect", "1", settings=queue).stdout
    assert "dead: failed 3 time(s)" in story and f"recheck retry --workload {queue.name} 1" in story
    drain(worker, queue)  # dead: never dispatched
    assert scalar(sql, "SELECT fail_count FROM job_queue") == 3
    retried = recheck("retry", "--workload", queue.name, "1", settings=queue)
    assert retried.returncode == 0 and "back in line" in retried.stdout
    ok = make_worker(queue, checks.ok)
    drain(ok, queue)
    assert query(sql, "SELECT next_check_at, check_count, fail_count FROM job_queue")[0] == (None, 1, 0)


def test_status_exits_4_while_dead_jobs_wait_and_0_once_they_are_retried(settings, sql, make_worker):
    """Issue 45, item 9: a cron or Nagios check running `status` must see dead jobs."""
    queue = jobs(settings, "job_queue")
    create(queue, JOB_QUEUE)
    query(sql, "INSERT INTO job_queue (data) VALUES ('x'), ('y')")
    drain(make_worker(queue, checks.ok), queue)
    query(sql, "UPDATE job_queue SET next_check_at = '9999-12-29', fail_count = 5 WHERE id = 2")  # dead
    shown = recheck("status", settings=queue)
    assert shown.returncode == 4 and "DEAD ROWS: 1 dead rows" in shown.stdout, shown.stdout
    assert json.loads(recheck("status", "--json", settings=queue).stdout)["dead"] == 1
    assert recheck("retry", "--workload", queue.name, "2", settings=queue).returncode == 0
    drain(make_worker(queue, checks.ok), queue)
    healthy = recheck("status", settings=queue)
    assert healthy.returncode == 0 and "every row fresh" in healthy.stdout, healthy.stdout


def test_dead_jobs_are_retried_or_discarded_in_bulk_by_their_error_and_age(settings, sql, make_worker):
    """Issue 47, item 4: after an outage, hundreds of dead jobs had to be fed to `recheck retry`
    from SQL. `retry --all-dead` and `discard --all-dead`, filtered by error and age."""
    queue = jobs(settings, "job_queue")
    create(queue, JOB_QUEUE)
    query(sql, "INSERT INTO job_queue (data) SELECT seq FROM seq_1_to_3000")
    dead = "UPDATE job_queue SET next_check_at = '9999-12-29', fail_count = 5, "
    query(sql, dead + "last_error = 'timeout talking to merchant 7', checked_at = NOW(3) WHERE id <= 2500")
    query(sql, dead + "last_error = 'HTTP 500', checked_at = NOW(3) - INTERVAL 2 HOUR "
               "WHERE id BETWEEN 2501 AND 2990")  # fmt: skip
    started = time.monotonic()
    retried = recheck(
        "retry", "--workload", queue.name, "--all-dead", "--error", "merchant 7", settings=queue
    )
    took = time.monotonic() - started
    assert retried.returncode == 0 and "2,500 dead rows back in line" in retried.stdout, retried.stdout
    print(f"2,500 dead rows retried by the command in {took:.2f} s (a process's start included)")
    assert scalar(sql, "SELECT COUNT(*) FROM job_queue WHERE id <= 2500 AND next_check_at <= NOW(3) "
                       "AND fail_count = 0") == 2500  # fmt: skip
    client = Client(settings=queue)
    assert client.discard_dead(older_than=3600) == 490  # the 500s of two hours ago: taken as done
    assert client.discard_dead(older_than=3600) == 0
    assert scalar(sql, "SELECT COUNT(*) FROM job_queue WHERE next_check_at = '9999-12-29'") == 0
    assert (
        scalar(sql, "SELECT COUNT(*) FROM job_queue WHERE next_check_at IS NULL AND last_error = 'HTTP 500'")
        == 490
    )
    drain(make_worker(queue, checks.ok), queue, rounds=40)
    assert (
        scalar(sql, "SELECT SUM(check_count) FROM job_queue") == 2500 + 10
    )  # retried once each, and 10 pending
    both = recheck("retry", "--workload", queue.name, "--all-dead", "1", settings=queue)
    assert both.returncode == 2 and "not both" in both.stderr
    assert recheck("discard", "--workload", queue.name, "1", settings=queue).returncode == 2
    client.close()


def test_a_done_row_is_enqueued_again_by_now(settings, sql, make_worker):
    queue = jobs(settings, "job_queue")
    create(queue, JOB_QUEUE)
    query(sql, "INSERT INTO job_queue (data) VALUES ('x')")
    worker = make_worker(queue, checks.ok)
    drain(worker, queue)
    client = Client(settings=queue)
    assert client.state(1)["state"] == "done"
    assert client.pause([1]).skipped == [1]  # done: nothing to pause
    assert client.now([1]).done == [1]
    drain(worker, queue)
    assert scalar(sql, "SELECT check_count FROM job_queue") == 2
    client.close()


def test_a_recheck_after_reschedules_a_job_instead_of_finishing_it(settings, sql, make_worker):
    from recheck import Recheck

    queue = jobs(settings, "job_queue")
    create(queue, JOB_QUEUE)
    query(sql, "INSERT INTO job_queue (data) VALUES ('x')")
    drain(make_worker(queue, lambda ids: [Recheck("later", after=3600)] * len(ids)), queue)
    late = scalar(sql, "SELECT TIMESTAMPDIFF(SECOND, NOW(3), next_check_at) FROM job_queue")
    assert 3500 < late <= 3600


def test_done_rows_past_keep_done_are_trimmed_in_small_batches(settings, sql, make_worker):
    from recheck.dispatcher.reconciler import Housekeeper
    from recheck.shared.mysql.rows import Rows

    queue = jobs(settings, "job_queue", keep_done=60)
    create(queue, JOB_QUEUE)
    query(sql, "INSERT INTO job_queue (data) SELECT seq FROM seq_1_to_2500")
    drain(make_worker(queue, checks.ok), queue, rounds=50)
    query(sql, "UPDATE job_queue SET checked_at = NOW(3) - INTERVAL 2 MINUTE WHERE id <= 2000")
    query(sql, "INSERT INTO job_queue (data) VALUES ('pending')")  # not done: never trimmed
    rows = Rows(queue, Database(queue))
    assert rows.trim_done(60, chunk=300, most=1200) == (1200, 1200)  # the walk goes on from 1200
    assert rows.trim_done(60, after=1200, chunk=300) == (800, None)  # to the end, then from the first
    assert scalar(sql, "SELECT COUNT(*) FROM job_queue") == 501
    # The dispatcher's housekeeping job does it every orphan_interval.
    query(sql, "UPDATE job_queue SET checked_at = NOW(3) - INTERVAL 2 MINUTE WHERE id <= 2100")
    assert Housekeeper(queue, Database(queue), make_store(queue)).run_once() == 100
    assert scalar(sql, "SELECT MIN(id) FROM job_queue") == 2101


def test_on_a_small_table_a_write_back_waits_for_no_row_but_its_own(settings, sql, mariadb):
    """A queue table holds a few dozen rows, and producers' transactions are open on it all the
    time. Left to itself the optimizer scanned such a table for a write-back (the batch second),
    so one producer's uncommitted INSERT, or any row the application held, made every write-back
    wait out a lock wait (1 s) and then take the deferring path. Every statement that reads or
    writes rows by batch reads the batch first: here none of them waits."""
    from recheck.shared.core.entries import datetime_to_ms
    from recheck.shared.mysql.rows import Rows

    queue = jobs(settings, "job_queue")
    create(queue, JOB_QUEUE)
    query(sql, "INSERT INTO job_queue (data) SELECT seq FROM seq_1_to_4")  # its statistics: a few rows
    producer, _ = hold_insert(queue)  # a producer's transaction, open
    app = mariadb.connect(settings.mysql.database)
    app.begin()
    with app.cursor() as cursor:
        cursor.execute("SELECT * FROM job_queue WHERE id = 4 FOR UPDATE")  # and a row the application holds
    writer = Database(queue)
    try:
        dues = {int(i): datetime_to_ms(d) for i, d in query(sql, "SELECT id, next_check_at FROM job_queue")}
        batch = [(i, dues[i]) for i in range(1, 4)]
        results = [(i, due, "ok") for i, due in batch]
        errors = [(i, due, "boom") for i, due in batch]
        statements = {}
        for name, shape in (("recurring", {"once": False}), ("once", {}), ("delete", {"done": "delete"})):
            rows = Rows(queue.evolve(**shape), Database(queue))
            rows.table  # noqa: B018 (reads the id column's kind)
            statements[f"{name} success"] = [rows.write_done(results) if shape.get("once", True)
                                             else rows.write_success(results)]  # fmt: skip
            statements[f"{name} failure"] = rows.write_failures(errors)
        statements["lock_unlocked"] = [rows.lock_unlocked([i for i, _ in batch])]
        statements["read_before_write"] = [rows.read_before_write(batch)]
        statements["quarantine"] = [(rows.queries.quarantine, {"batch": json.dumps(batch), "reason": "r"})]
        waited = {}
        for name, steps in statements.items():
            started = time.monotonic()
            writer.conn.begin()
            try:
                with writer.conn.cursor() as cursor:
                    touched: int | str = sum(cursor.execute(sql_text, args) for sql_text, args in steps)
            except pymysql.err.OperationalError as error:  # 1205: it waited out the lock wait
                touched = str(error)
            writer.conn.rollback()
            waited[name] = (round(time.monotonic() - started, 3), touched)
        quick = [
            name
            for name, (took, touched) in waited.items()
            if took < 0.9 and touched == 3 * len(statements[name])  # a lock wait is 1 s (0.64 s seen
            # without one, beside three other test processes)
        ]
        assert quick == list(statements), waited
    finally:  # the test database is dropped afterwards: nothing may hold it
        for connection in (producer, app, writer):
            connection.close()


def test_on_a_small_table_actions_and_trimming_wait_for_no_row_but_their_own(settings, sql, mariadb):
    """Issue 45, items 5 and 7: the actions' `UPDATE ... WHERE id IN (...)` and keep_done's
    DELETE scanned a small table's whole PRIMARY index, locking every row: a producer's open
    INSERT made `recheck retry` exit 1 after a lock wait, and trimming fail every run. Each now
    reads and locks only the rows it names."""
    from recheck.shared.mysql.rows import Rows

    queue = jobs(settings, "job_queue", keep_done=60)
    create(queue, JOB_QUEUE)
    query(sql, "INSERT INTO job_queue (data) SELECT seq FROM seq_1_to_46")  # its statistics: a few rows
    query(sql, "UPDATE job_queue SET next_check_at = NULL, checked_at = NOW(3) - INTERVAL 1 HOUR "
               "WHERE id <= 10 AND id <> 5")  # done an hour ago, but for 5  # fmt: skip
    query(sql, "UPDATE job_queue SET next_check_at = '9999-12-29' WHERE id BETWEEN 11 AND 25")  # dead
    query(sql, "UPDATE job_queue SET next_check_at = '9999-12-31' WHERE id BETWEEN 26 AND 35")  # quarantined
    producer, _ = hold_insert(queue)  # a producer's transaction, open
    app = mariadb.connect(settings.mysql.database)
    app.begin()
    with app.cursor() as cursor:
        cursor.execute(
            "SELECT * FROM job_queue WHERE id = 5 FOR UPDATE"
        )  # and a pending row the application holds
    writer = Database(queue)
    rows = Rows(queue, writer)
    try:
        pending = list(range(36, 46))
        actions = {
            "now": (lambda: rows.mark_now([1, 2, 3, 4, 6, 7, 8, 9, 10]), 9),
            "pause, resume": (lambda: rows.pause(pending) + rows.resume(pending), 20),
            "retry": (lambda: rows.retry(list(range(11, 26))), 15),
            "release": (lambda: rows.release(list(range(26, 36))), 10),
            "trim": (lambda: rows.trim_done(60)[0], 9),
        }
        waited = {}
        for name, (act, touches) in actions.items():
            started = time.monotonic()
            writer.conn.begin()
            try:
                touched: int | str = act()
            except pymysql.err.OperationalError as error:  # 1205: it waited out the lock wait
                touched = str(error)
            writer.conn.rollback()
            waited[name] = (round(time.monotonic() - started, 3), touched, touches)
        quick = [
            name for name, (took, touched, touches) in waited.items() if took < 0.9 and touched == touches
        ]
        assert quick == list(actions), waited
    finally:  # the test database is dropped afterwards: nothing may hold it
        for connection in (producer, app, writer):
            connection.close()


def hold_insert(settings) -> tuple[Database, int]:
    """A producer's INSERT in a transaction left open: its due time is taken now, its row unseen."""
    producer = Database(settings)
    producer.conn.begin()
    with producer.conn.cursor() as cursor:
        cursor.execute("INSERT INTO job_queue (data) VALUES ('late')")
        return producer, int(cursor.lastrowid)


@pytest.mark.serial  # timing: serial layer (make test)
def test_a_producer_committing_seconds_late_is_still_handled_soon_after(make_settings, sql, procs):
    """Producers' INSERTs take their due time when they run; two transactions commit late, after
    the dispatcher's cursor has passed that time (other producers' rows kept coming). Committed
    within sweep_grace (1.5 s) of its due time, a job starts at the next poll: the dispatcher
    rereads its last sweep_grace. Committed later than that (3 s), the sweep takes it: within
    sweep_interval (set to 4 s here so the two paths cannot be confused)."""
    settings = make_settings(sweep_interval=4.0)
    queue = jobs(settings, "job_queue")
    create(queue, JOB_QUEUE)
    env = {"RECHECK_CHECK": "tests.support.checks:stamped", "TEST_CHECK_RECORD": str(procs.log_dir)}
    procs.start("dispatcher", queue)
    worker = procs.start("worker", queue, env=env)
    wait_for(lambda: "started" in procs.log_of(worker), 15, "the worker started")
    soon, soon_id = hold_insert(queue)
    later, later_id = hold_insert(queue)
    stop = threading.Event()

    def produce() -> None:  # other producers: one row per transaction, every 50 ms
        conn = Database(queue)
        while not stop.wait(0.05):
            conn.execute("INSERT INTO job_queue (data) VALUES ('on time')")
        conn.close()

    threading.Thread(target=produce, daemon=True).start()
    inserted = time.time()
    committed = {}
    for producer, row_id, late_by in ((soon, soon_id, 1.0), (later, later_id, 3.0)):
        time.sleep(max(inserted + late_by - time.time(), 0))
        producer.conn.commit()
        committed[row_id] = time.time()
    both = f"SELECT MIN(check_count) FROM job_queue WHERE id IN ({soon_id}, {later_id})"
    wait_for(lambda: scalar(sql, both) == 1, 15, "the late jobs handled")
    stop.set()
    lines = [line.split() for f in procs.log_dir.glob("*.stamps") for line in f.read_text().splitlines()]
    started = {int(row_id): float(at) for at, row_id in lines if int(row_id) in (soon_id, later_id)}
    print(f"late commits: 1 s late started {started[soon_id] - committed[soon_id]:.3f} s after the commit, "
          f"3 s late {started[later_id] - committed[later_id]:.3f} s after")  # fmt: skip
    assert len(lines) == len({row_id for _, row_id in lines})  # nothing started twice
    assert started[soon_id] - committed[soon_id] < 0.5, started[soon_id] - committed[soon_id]
    assert started[later_id] - committed[later_id] < 4.0 + 0.5, started[later_id] - committed[later_id]
    soon.close()
    later.close()


@pytest.mark.serial
def test_a_worker_killed_mid_job_runs_it_again_and_writes_it_once(make_settings, sql, procs):
    settings = make_settings()
    queue = jobs(settings, "job_queue", check_kind="row")
    create(queue, JOB_QUEUE)
    query(sql, "INSERT INTO job_queue (data) SELECT seq FROM seq_1_to_40")
    env = {"RECHECK_CHECK": "tests.support.checks:slow_row", "TEST_CHECK_SLEEP": "2"}
    procs.start("dispatcher", queue)
    victim = procs.start("worker", queue, env=env)
    wait_for(lambda: procs.log_of(victim).count("started") >= 1, 15, "the worker started")
    time.sleep(1.0)  # checks under way
    victim.send_signal(signal.SIGKILL)
    victim.wait(10)
    procs.start("worker", queue, env={**env, "TEST_CHECK_SLEEP": "0.01"})
    wait_for(lambda: scalar(sql, "SELECT COUNT(*) FROM job_queue WHERE check_count = 0") == 0, 20,
             "every job handled after the kill")  # fmt: skip
    assert scalar(sql, "SELECT MAX(check_count) FROM job_queue") == 1  # written once each
    assert scalar(sql, "SELECT COUNT(*) FROM job_queue WHERE next_check_at IS NOT NULL") == 0


@pytest.mark.serial  # real processes racing: serial layer (make test)
def test_rounds_of_now_and_retry_on_idle_jobs_run_each_job_once_a_round(make_settings, sql, procs):
    """Issue 45, item 1: `now` on 1,000 done jobs at a time while the dispatcher's pages read the
    same rows (they are due now) ran whole takes twice in most rounds. A check that records every
    call: each job starts once per round, over rounds of `now`, then of `retry` on dead jobs."""
    settings = make_settings()
    queue = jobs(settings, "job_queue", max_attempts=1)
    create(queue, JOB_QUEUE)
    query(sql, "INSERT INTO job_queue (data) SELECT seq FROM seq_1_to_3000")
    env = {"RECHECK_CHECK": "tests.support.checks:flaky_provider", "TEST_CHECK_RECORD": str(procs.log_dir),
           "TEST_PROVIDER_DOWN": str(procs.log_dir / "down")}  # fmt: skip
    procs.start("dispatcher", queue)
    procs.start("worker", queue, env=env)
    procs.start("worker", queue, env=env)
    idle = "SELECT COUNT(*) FROM job_queue WHERE next_check_at IS NULL OR next_check_at > '9000-01-01'"
    wait_for(lambda: scalar(sql, idle) == 3000, 30, "the first run of every job")
    client = Client(settings=queue)
    rounds = [("now", client.now)] * 6 + [("retry", client.retry)] * 3
    for number, (name, act) in enumerate(rounds, start=1):
        if name == "retry":  # every job fails once (max_attempts 1): dead, then retried
            (procs.log_dir / "down").touch()
            assert len(client.now(range(1, 3001)).done) == 3000
            wait_for(lambda: scalar(sql, "SELECT COUNT(*) FROM job_queue WHERE fail_count = 1") == 3000
                     and scalar(sql, idle) == 3000, 30, "every job dead")  # fmt: skip
            (procs.log_dir / "down").unlink()
        before = scalar(sql, "SELECT SUM(check_count) FROM job_queue")
        for start in range(1, 3001, 1000):
            assert len(act(range(start, start + 1000)).done) == 1000, (name, number)
        wait_for(lambda b=before: scalar(sql, "SELECT SUM(check_count) FROM job_queue") == b + 3000
                 and scalar(sql, idle) == 3000, 30, f"round {number} ({name}) handled")  # fmt: skip
    time.sleep(1.0)  # a repeat queued late would start within this (the queue is empty)
    stamps = [line.split()[1] for f in procs.log_dir.glob("*.stamps") for line in f.read_text().splitlines()]
    calls = 1 + len(rounds) + 3  # the first run, the rounds, the failing run before each retry
    repeats = {row_id: n for row_id, n in collections.Counter(stamps).items() if n != calls}
    print(f"{len(stamps)} check calls over {calls} runs of 3,000 jobs; repeated: {len(repeats)}")
    assert not repeats, dict(list(repeats.items())[:10])
    client.close()


def test_a_late_commit_behind_more_than_a_page_of_waiting_jobs_is_queued_at_the_next_poll(settings, sql, rds):
    """Issue 45, item 4: the look-back read one page from the start of its window, the oldest
    rows still waiting; a late commit further on waited for the sweep. It reads the whole window."""
    from recheck.shared.redis.keys import Keys
    from tests.support.helpers import make_dispatcher

    queue = jobs(settings, "job_queue", dispatch_batch=100)
    create(queue, JOB_QUEUE)
    query(sql, "INSERT INTO job_queue (data) SELECT seq FROM seq_1_to_250")
    late, late_id = hold_insert(queue)  # due now, committed after the cursor has passed it
    query(sql, "INSERT INTO job_queue (data) SELECT seq FROM seq_1_to_250")
    try:
        dispatcher = make_dispatcher(queue)
        for _ in range(20):
            if dispatcher.poll() > 0:
                break
        inflight = Keys(queue.deployment.key_prefix, queue.name).inflight
        assert rds.hlen(inflight) == 500  # every committed job queued (none taken: no worker)
        late.conn.commit()
        assert dispatcher.poll() > 0  # caught up: the look-back
        assert rds.hexists(inflight, str(late_id))
    finally:
        late.close()
