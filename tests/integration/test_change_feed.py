"""The change feed (issues 24 and 32): every transition of a row's stored result, and between
failing and succeeding, recorded exactly once in the write-back's own transaction, read with
Client.changes() and `recheck changes`; a reader never loses one, however slow it is, however
late a write-back commits, however busy another workload is.

On the code before issue 24 there was no feed; before issue 32 a reader gave up on a skipped
position after 30 s of its own wall time (a slow consumer or a late commit lost changes), all
workloads shared one table of positions (a busy neighbour made a reader lose changes, trimmed
a quiet workload's, and two deployments read each other's), a result longer than 1,024
characters stopped its row being written, and a DECIMAL, FLOAT or CHAR result was recorded as a
change at every check.
"""

from __future__ import annotations

import contextlib
import json
import random
import signal
import subprocess
import sys
import threading
import time

import pymysql
import pytest

from recheck import Client
from recheck.shared.config import ConfigError
from recheck.shared.mysql.db import Database, DatabaseDown
from recheck.shared.mysql.rows import Rows
from recheck.workers.checks import Outcome
from tests.support.helpers import (
    REPO,
    dispatch_all,
    drain,
    make_store,
    prepare,
    query,
    recheck,
    scalar,
    workload,
)
from tests.support.servers import wait_for

MONITORS = "CREATE TABLE monitors (id BIGINT PRIMARY KEY, url VARCHAR(200) NOT NULL)"
FEED = "monitors_recheck_changes"  # the monitors table's change feed
ENOUGH_CHANGES = 60  # the kill -9 test's feed: results flipped often enough to test the chains
INSERT_CHANGE = (f"INSERT INTO {FEED} (row_key, at, old_result, new_result, old_failing, new_failing) "
                 "VALUES (%s, NOW(3), 'a', 'b', 0, 0)")  # fmt: skip


def monitors(settings, **values):
    return workload(settings, "monitors", table="monitors", id_column="id", columns="url", changes=True,
                    check_kind="batch", **values)  # fmt: skip


def url_states(rows: list) -> list:
    """The url's first label as the result ('http://up.example/' -> 'up'); one that starts
    with 'fail' fails."""
    labels = [row["url"].split("//")[1].split(".")[0] for row in rows]
    return [
        RuntimeError(f"{label} does not answer") if label.startswith("fail") else label for label in labels
    ]


def set_urls(sql, ids, url: str) -> None:
    query(sql, f"UPDATE monitors SET url = %s, next_check_at = NOW(3) - INTERVAL 1 SECOND "
               f"WHERE id IN ({', '.join(map(str, ids))})", (url,))  # fmt: skip


def feed_size(sql) -> int:
    """How many changes the monitors' feed holds."""
    return int(scalar(sql, f"SELECT COUNT(*) FROM {FEED}"))


def feed(client: Client, since: int = 0) -> list[tuple]:
    return [(int(c.id), c.old, c.new, c.old_failing, c.new_failing) for c in client.changes(since)]


@pytest.fixture
def watched(settings, sql):
    settings = monitors(settings)
    rows = ", ".join(f"({i}, 'http://up.example/')" for i in range(1, 21))
    prepare(settings, MONITORS, f"INSERT INTO monitors (id, url) VALUES {rows}")
    assert scalar(sql, f"SELECT COUNT(*) FROM {FEED}") == 0  # init-db made the feed's table
    return settings


def test_every_transition_once_and_nothing_for_a_result_that_stays(watched, make_worker, sql):
    worker, client = make_worker(watched, url_states), Client(settings=watched)
    drain(worker, watched)
    assert feed(client) == [(i, None, "up", False, False) for i in range(1, 21)]  # first results
    last = max(c.pos for c in client.changes())

    set_urls(sql, range(1, 21), "http://up.example/")  # due again, same result: no change
    set_urls(sql, [1, 2, 3], "http://down.example/")
    set_urls(sql, [4, 5], "http://fail.example/")
    drain(worker, watched)
    assert sorted(feed(client, last)) == [
        (1, "up", "down", False, False), (2, "up", "down", False, False), (3, "up", "down", False, False),
        (4, "up", "up", False, True), (5, "up", "up", False, True),
    ]  # fmt: skip
    failed = next(c for c in client.changes(last) if c.id == "4")
    assert failed.error and "does not answer" in failed.error
    last = max(c.pos for c in client.changes())

    set_urls(sql, [4, 5], "http://failing.example/")  # still failing: nothing new
    drain(worker, watched)
    assert feed(client, last) == []
    set_urls(sql, [4], "http://up.example/")  # recovers with the same result: a change
    set_urls(sql, [1], "http://DOWN.example/")  # compared exactly: 'DOWN' is not 'down'
    set_urls(sql, [2], "http://up.example/")
    drain(worker, watched)
    assert sorted(feed(client, last)) == [
        (1, "down", "DOWN", False, False), (2, "down", "up", False, False), (4, "up", "up", True, False),
    ]  # fmt: skip

    # The command line: one JSON object per line with at least these fields.
    printed = recheck("changes", "--json", "--since", str(last), settings=watched,
                      env={"RECHECK_CONFIG": ""}, timeout=30)  # fmt: skip
    lines = [json.loads(line) for line in printed.stdout.splitlines()]
    assert printed.returncode == 0 and len(lines) == 3, printed.stdout + printed.stderr
    assert [line["pos"] for line in lines] == list(range(last + 1, last + 4))  # no gaps between them
    assert {"id", "old", "new", "at", "pos"} <= set(lines[0])
    assert recheck("changes", settings=watched).returncode == 0
    client.close()


def test_a_batch_taken_out_of_key_order_records_each_row_under_its_own_key(watched, make_worker, sql):
    """A write-back writes its successes in key order (the cheaper order for MySQL's indexes):
    rows taken in another order (due here in the reverse order of their keys, so taken 20 first)
    are still each recorded with their own result, the failures among them too."""
    worker, client = make_worker(watched, url_states), Client(settings=watched)
    for i in range(1, 21):
        label = f"fail{i}" if i % 5 == 0 else f"r{i}"
        query(sql, "UPDATE monitors SET url = %s, next_check_at = NOW(3) - INTERVAL %s SECOND WHERE id = %s",
              (f"http://{label}.example/", i, i))  # fmt: skip
    drain(worker, watched)
    expected = [
        (i, None, None, False, True) if i % 5 == 0 else (i, None, f"r{i}", False, False) for i in range(1, 21)
    ]
    assert sorted(feed(client)) == expected
    client.close()


def test_a_retried_write_records_nothing_twice(watched, make_worker, sql):
    """The write commits, then its connection dies before the reply: the worker retries the
    write (as after any lost connection), the retry is fenced out, and so are its transitions."""
    worker = make_worker(watched, url_states)
    db = worker.lane(watched.name).completer.writeback.db
    real = db.run_in_transaction
    lost = []

    def commit_then_lose_the_reply(work, *args, **kwargs):
        result = real(work, *args, **kwargs)
        if not lost:
            lost.append(result)
            with sql.cursor() as cursor:
                cursor.execute("KILL %s", (db.conn.thread_id(),))
            raise DatabaseDown("lost connection to MySQL server during query (test)")
        return result

    db.run_in_transaction = commit_then_lose_the_reply
    drain(worker, watched)
    assert lost and lost[0].changes == 20  # the first attempt committed its 20 changes...
    assert scalar(sql, f"SELECT COUNT(*) FROM {FEED}") == 20  # ...and the retry none more
    assert scalar(sql, "SELECT SUM(check_count) FROM monitors") == 20


def test_a_late_write_for_an_old_due_time_records_nothing(watched, make_worker, sql):
    """A worker whose result comes after the row was checked again (a reclaimed batch, a
    duplicate): its write is fenced out, and its different result is no transition."""
    dispatch_all(watched)
    stale = make_store(watched).client.lrange(make_store(watched).keys.queue, 0, -1)
    worker = make_worker(watched, url_states)
    drain(worker, watched)
    before = scalar(sql, f"SELECT COUNT(*) FROM {FEED}")
    items, _ = worker.lane(watched.name).completer.writeback.keys.parse(stale)
    written = worker.lane(watched.name).completer.writeback.write(items, [Outcome(True, "down")] * len(items))
    assert written.stale == 20 and written.changes == 0
    assert scalar(sql, f"SELECT COUNT(*) FROM {FEED}") == before


def test_follow_is_woken_at_once_and_resumes_from_a_checkpoint(watched, make_worker, sql):
    worker, client = make_worker(watched, url_states), Client(settings=watched)
    drain(worker, watched)
    seen: list = []

    def follow():
        follower = Client(settings=watched)
        for change in follower.changes(None, follow=True, idle=30.0):  # only what comes next
            seen.append((change, time.monotonic()))
            if len(seen) == 3:
                return

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    time.sleep(0.5)
    set_urls(sql, [7, 8, 9], "http://down.example/")
    drain(worker, watched)
    written = time.monotonic()
    thread.join(10)
    assert len(seen) == 3, seen
    assert max(at for _, at in seen) - written < 1.0  # woken by the workers, not the 30 s poll
    checkpoint = seen[-1][0].checkpoint
    assert checkpoint == max(c.pos for c, _ in seen)  # nothing awaited: resume right after
    assert list(client.changes(checkpoint)) == []
    client.close()


def test_a_change_that_commits_after_a_later_one_is_still_delivered(watched):
    """Two write-backs commit out of position order: the reader delivers the later one, keeps its
    checkpoint below the skipped position, and delivers the skipped one when it commits."""
    insert = INSERT_CHANGE
    slow, quick = Database(watched), Database(watched)
    try:
        slow.conn.begin()
        with slow.conn.cursor() as cursor:
            cursor.execute(insert, ("slow",))  # takes its position now, commits later
        quick.execute(insert, ("quick",))
        delivered = []

        def follow():
            for change in Client(settings=watched).changes(0, follow=True, idle=0.2):
                delivered.append(change)
                if len(delivered) == 2:
                    return

        thread = threading.Thread(target=follow, daemon=True)
        thread.start()
        wait_for(lambda: len(delivered) == 1, 5, "the later change")
        first = delivered[0]
        assert first.id == "quick" and first.checkpoint < first.pos - 1, first  # the slow one awaited
        slow.conn.commit()
        thread.join(5)
        assert [c.id for c in delivered] == ["quick", "slow"]
        assert delivered[1].checkpoint == first.pos  # both delivered: resume after the highest
    finally:
        slow.close()  # an open transaction would hold up the test database's DROP
        quick.close()


def test_trimmed_to_changes_keep_and_a_reader_starts_at_the_oldest_kept(watched, sql):
    db = Database(watched)
    db.execute(
        f"INSERT INTO {FEED} (row_key, at, old_result, new_result, old_failing, new_failing) "
        "SELECT seq, NOW(3), 'a', 'b', 0, 0 FROM seq_1_to_2500"
    )  # MariaDB's sequence engine: test data only
    rows = Rows(watched, db)
    assert rows.trim_changes(1_000) == 1_500
    oldest, newest = rows.changes_span()
    assert newest - oldest + 1 == 1_000
    started = time.monotonic()
    assert len(list(Client(settings=watched).changes(0))) == 1_000
    assert time.monotonic() - started < 5  # the trimmed positions are not waited for
    db.close()


def statements(worker) -> int:
    """Statements that read or write rows, run so far on the worker's own connections (the write
    -back's and the columns reader's; SHOW is not one): nobody else's statements count."""
    names = "'Com_select', 'Com_insert', 'Com_update', 'Com_update_multi', 'Com_delete', 'Com_insert_select'"
    total = 0
    lane = worker.lane("monitors")
    for db in (lane.db, lane.batch.reader.db):
        found = query(db.conn, f"SHOW SESSION STATUS WHERE Variable_name IN ({names})")
        total += sum(int(value) for _, value in found)
    return total


def test_the_feed_costs_the_same_few_statements_per_batch_whatever_its_size(settings, make_worker, sql):
    """Reading the old results and recording the changes is a constant number of statements per
    write-back, not one per row: a batch of 400 changes costs what a batch of 10 does."""
    watched = monitors(settings, worker_batch=400, worker_take_max=400, write_slots=0)
    rows = ", ".join(f"({i}, 'http://up.example/')" for i in range(1, 401))
    prepare(watched, MONITORS, f"INSERT INTO monitors (id, url) VALUES {rows}")
    worker, client = make_worker(watched, url_states), Client(settings=watched)
    drain(worker, watched)  # first results; and whatever a worker does once
    cost = {}
    for size, label in ((10, "down"), (400, "slow"), (10, "up")):  # every row of each batch changes
        set_urls(sql, range(1, size + 1), f"http://{label}.example/")
        dispatch_all(watched)
        before = statements(worker)
        worker.lane(watched.name).poll()  # one take, one batch, one write-back
        cost.setdefault(size, []).append(statements(worker) - before)
    set_urls(sql, range(11, 401), "http://slow.example/")  # due again, each with the result it has
    dispatch_all(watched)  # nothing changes: the write of unchanged rows alone
    before = statements(worker)
    worker.lane(watched.name).poll()
    unchanged = statements(worker) - before
    assert len(feed(client)) == 400 + 10 + 400 + 10  # every change recorded, nothing more
    print(f"statements per take with changes (columns read, unchanged write, locked read, writes, read back, "
          f"feed): {cost}; with nothing changed: {unchanged}")  # fmt: skip
    # The columns' read, the write of the rows whose result stays (none here), the locked read of
    # the old results, the UPDATE, the read back of the rows whose result may have changed, the
    # feed's INSERT; with nothing changed, the columns' read and the write of the unchanged rows.
    assert cost == {10: [6, 6], 400: [6]}, cost
    assert unchanged == 2, unchanged


def test_a_workload_without_changes_has_no_feed(settings):
    with pytest.raises(ConfigError, match="changes = true"):
        next(Client(settings=settings).changes())


# -- exactly once while workers are killed and connections cut ----------------------------------
def test_the_feed_chains_exactly_across_kill_9_and_cut_connections(watched, sql, procs, mariadb):
    """Results flip all the time while workers are killed with SIGKILL and MySQL connections are
    cut mid-write: for every row the feed must chain (each change starts where the previous one
    ended) and end at the row's stored state. A lost change breaks the chain; an invented one
    (a retried write recorded twice) repeats a transition that no longer starts where it says."""
    settings = watched.evolve(interval=0.5, check_kind="row", worker_batch=5)
    env = {"RECHECK_CHECK": "tests.support.checks:url_state", "TEST_CHECK_SLEEP": "0.05"}
    procs.start("dispatcher", settings)
    workers = [procs.start("worker", settings, env=env) for _ in range(2)]
    rng = random.Random(24)
    urls = ["http://up.example/", "http://down.example/", "http://fail.example/"]
    deadline, latest = time.monotonic() + 20, time.monotonic() + 45
    kills = cuts = 0
    # 20 s of churn; on a loaded machine (processes seconds slower to come up, fewer checks)
    # longer, until workers were killed and the feed holds enough changes for the chains to
    # mean something.
    while time.monotonic() < deadline or (
        time.monotonic() < latest and (kills < 2 or feed_size(sql) <= ENOUGH_CHANGES)
    ):
        for row_id in rng.sample(range(1, 21), 6):
            query(sql, "UPDATE monitors SET url = %s WHERE id = %s", (rng.choice(urls), row_id))
        time.sleep(0.3)
        # Only a worker that is up is killed: on a loaded machine a new one takes seconds to start,
        # and killing it before then would kill no batch and stop all progress.
        up = [index for index, worker in enumerate(workers) if " started: " in procs.log_of(worker)]
        if rng.random() < 0.15 and up:
            victim = rng.choice(up)
            workers[victim].send_signal(signal.SIGKILL)
            workers[victim] = procs.start("worker", settings, env=env)
            kills += 1
        elif rng.random() < 0.2:
            for (process_id,) in query(sql, "SELECT ID FROM information_schema.PROCESSLIST WHERE DB = %s "
                                            "AND ID <> CONNECTION_ID()",
                                       (settings.mysql.database,)):  # fmt: skip
                with contextlib.suppress(pymysql.err.OperationalError):  # it may have ended meanwhile (1094)
                    query(sql, f"KILL CONNECTION {int(process_id)}")
                    cuts += 1
    assert kills >= 2 and cuts >= 1, (kills, cuts)
    query(sql, "UPDATE monitors SET url = 'http://up.example/'")
    time.sleep(3)  # every row checked again at least a few times: the feed's end settles
    procs.stop_all()

    stored = {
        int(k): (r, int(f) > 0) for k, r, f in query(sql, "SELECT id, status, fail_count FROM monitors")
    }
    chains: dict[int, list] = {}
    for _, key, old, new, old_failing, new_failing in query(
        sql, f"SELECT pos, row_key, old_result, new_result, old_failing, new_failing FROM {FEED} "
             "ORDER BY pos"):  # fmt: skip
        chains.setdefault(int(key), []).append((old, bool(old_failing), new, bool(new_failing)))
    assert sum(len(chain) for chain in chains.values()) > ENOUGH_CHANGES  # results really flipped
    for row_id, chain in chains.items():
        state = (None, False)
        for old, old_failing, new, new_failing in chain:
            assert (old, old_failing) == state, (row_id, chain)
            assert (new, new_failing) != (old, old_failing), (row_id, chain)
            state = (new, new_failing)
        assert state == stored[row_id], (row_id, chain, stored[row_id])


def test_recheck_changes_follow_prints_as_they_come(watched, make_worker, sql):
    worker = make_worker(watched, url_states)
    env = {k: v for k, v in watched.env_overrides().items()}
    env.update({"PYTHONPATH": str(REPO), "RECHECK_CHANGES": "true"})
    follower = subprocess.Popen(
        [sys.executable, "-m", "recheck", "changes", "--follow", "--json"],
        env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        time.sleep(2.0)  # started, nothing yet
        drain(worker, watched)
        first = json.loads(follower.stdout.readline())
        assert first["old"] is None and first["new"] == "up"
    finally:
        follower.send_signal(signal.SIGTERM)
        assert follower.wait(10) == 0, follower.stderr.read()


# -- issue 32: never lose a change, one feed per table, any column type ---------------------------
def follow_into(settings, since: int, delivered: list, stop: threading.Event, pause_after_first: float = 0.0):
    """A reader following the feed in a thread; pause_after_first: a consumer that spends that
    long on its first change (a slow alert hook)."""

    def run():
        client = Client(settings=settings)
        try:
            for change in client.changes(since, follow=True, idle=0.2):
                delivered.append(change)
                if len(delivered) == 1 and pause_after_first:
                    time.sleep(pause_after_first)
                if stop.is_set():
                    break
        except Exception:
            if not stop.is_set():  # after the test, its database is gone: the reader's end
                raise
        finally:
            client.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_a_write_back_committing_late_reaches_a_fast_and_a_slow_reader(watched):
    """A write-back takes its feed position, then commits 5 s after a later one (a worker
    paused inside its write-back). A fast reader and one that spends 4 s on its first change
    both get it, and no checkpoint passes it meanwhile. (Before issue 32 both lost one 40 s late:
    a skipped position was given up after 30 s of the reader's own time. The reader has no such
    timer now: it asks MySQL whether a transaction still holds the position (client.py Gaps),
    and lets a range go only after two answers of "none" GAP_SETTLED apart; 5 s is five of those,
    and a transaction holding the position answers the same at 5 s as at 40.)"""
    late, quick = Database(watched), Database(watched)
    stop = threading.Event()
    fast, slow = [], []
    try:
        late.conn.begin()
        with late.conn.cursor() as cursor:
            cursor.execute(INSERT_CHANGE, ("late",))  # its position now, its commit 5 s later
        quick.execute(INSERT_CHANGE, ("quick",))
        follow_into(watched, 0, fast, stop)
        follow_into(watched, 0, slow, stop, pause_after_first=4)
        wait_for(lambda: fast and slow, 10, "the later change")
        late_pos = fast[0].pos - 1
        assert fast[0].id == "quick" and fast[0].checkpoint < late_pos
        # Meanwhile a reader that only reads what is there returns at once, its checkpoint below.
        taken = list(Client(settings=watched).changes(0))
        assert [c.id for c in taken] == ["quick"] and taken[-1].checkpoint < late_pos
        time.sleep(5)  # many looks, GAP_SETTLED apart, each finding the position held
        assert len(fast) == 1  # still awaited, not given up
        late.conn.commit()
        wait_for(lambda: len(fast) == 2 and len(slow) == 2, 10, "the late change, for both readers")
        for delivered in (fast, slow):
            assert [c.id for c in delivered] == ["quick", "late"]
            assert delivered[1].checkpoint == delivered[0].pos  # both came: resume after the highest
    finally:
        stop.set()
        late.close()
        quick.close()


def test_a_busy_neighbour_neither_loses_nor_trims_a_quiet_workloads_changes(watched, sql):
    """Another workload of the same database commits 2,500 changes while one of this workload's
    commits 0.5 s after a later one: delivered; each table has its feed, its positions and its
    trimming. (Before: one table of positions for all workloads, so the reader waited on the
    neighbour's positions, looked up only 1,000 of them, and lost the late change; a trim kept
    changes_keep positions of all workloads, not of this one.)"""
    pings = workload(watched, "pings", table="pings", changes_keep=1_000)
    prepare(pings, "CREATE TABLE pings (id BIGINT PRIMARY KEY, url VARCHAR(200) NOT NULL)")
    late, quick = Database(watched), Database(watched)
    stop, delivered = threading.Event(), []
    try:
        follow_into(watched, 0, delivered, stop)
        query(sql, "INSERT INTO pings_recheck_changes (row_key, at, old_result, new_result, old_failing, "
                   "new_failing) SELECT seq, NOW(3), 'a', 'b', 0, 0 FROM seq_1_to_2500")  # fmt: skip
        late.conn.begin()
        with late.conn.cursor() as cursor:
            cursor.execute(INSERT_CHANGE, ("late",))
        quick.execute(INSERT_CHANGE, ("quick",))
        wait_for(lambda: delivered, 5, "the later change")
        time.sleep(0.5)
        late.conn.commit()
        wait_for(lambda: len(delivered) == 2, 40, "the late change")
        assert [c.id for c in delivered] == ["quick", "late"]
    finally:
        stop.set()
        late.close()
        quick.close()
    assert Rows(pings, Database(pings)).trim_changes(pings.changes_keep) == 1_500
    assert Rows(watched, Database(watched)).trim_changes(1_000) == 0  # this feed's 2 changes stay
    assert [c.id for c in Client(settings=watched).changes(0)] == ["late", "quick"]  # in position order
    assert len(list(Client(settings=pings).changes(0))) == 1_000


def test_two_deployments_in_one_database_never_see_each_others_feed(settings, sql):
    """Both workloads named `default` (two deployments without a workloads file), two tables in
    one database: each Client reads its own feed only."""
    ours = settings.evolve(table="monitors", id_column="id", columns=("url",), changes=True)
    theirs = settings.evolve(
        table="pings", id_column="id", columns=("url",), changes=True, key_prefix="other"
    )
    assert ours.name == theirs.name == "default" and ours.changes_table != theirs.changes_table
    prepare(ours, MONITORS)
    prepare(theirs, "CREATE TABLE pings (id BIGINT PRIMARY KEY, url VARCHAR(200) NOT NULL)")
    for deployment, key in ((ours, "ours"), (theirs, "theirs")):
        Database(deployment).execute(INSERT_CHANGE.replace(FEED, deployment.changes_table), (key,))
    assert [c.id for c in Client(settings=ours).changes(0)] == ["ours"]
    assert [c.id for c in Client(settings=theirs).changes(0)] == ["theirs"]


def test_a_long_changes_table_name_is_cut_and_stays_unique(settings):
    long_a, long_b = "a" * 60, "a" * 59 + "b"
    names = {settings.evolve(table=t).changes_table for t in (long_a, long_b)}
    assert len(names) == 2 and all(len(n) <= 64 and n.endswith("_recheck_changes") for n in names)


# Each stored result column type, what the check returns (the same value every time, written in
# another way than MySQL gives it back), and the feed's text of the stored value.
COLUMN_TYPES = {
    "INT": (7, "7"),
    "DECIMAL(5,2)": ("0.5", "0.50"),
    "DOUBLE": (0.1, "0.1"),
    "FLOAT": (0.123456789, None),  # a single-precision float: whatever MySQL gives back
    "TINYINT(1)": (True, "1"),
    "CHAR(10)": ("ok   ", "ok"),  # CHAR drops trailing spaces
}


@pytest.mark.parametrize("column_type", list(COLUMN_TYPES))
def test_a_result_that_stays_the_same_in_its_own_type_is_no_change(settings, make_worker, sql, column_type):
    value, shown = COLUMN_TYPES[column_type]
    scores = settings.evolve(table="scores", id_column="id", result_column="score", changes=True,
                             check_kind="batch")  # fmt: skip
    prepare(scores, "CREATE TABLE scores (id BIGINT PRIMARY KEY)",
            f"ALTER TABLE scores MODIFY score {column_type} NULL",  # init-db added it: now of this type
            "INSERT INTO scores (id) SELECT seq FROM seq_1_to_20")  # fmt: skip
    answer = {"value": value}
    worker = make_worker(scores, lambda ids: [answer["value"]] * len(ids))
    for _ in range(3):
        query(sql, "UPDATE scores SET next_check_at = NOW(3) - INTERVAL 1 SECOND")
        drain(worker, scores)
    assert scalar(sql, "SELECT MIN(check_count) FROM scores") == 3  # every check written, every time
    changes = list(Client(settings=scores).changes(0))
    assert [(c.old, c.old_failing) for c in changes] == [(None, False)] * 20  # the first results only
    stored = scalar(sql, "SELECT score FROM scores LIMIT 1")
    assert {c.new for c in changes} == {shown if shown is not None else str(stored)}
    answer["value"] = 0  # a real change: recorded once per row
    query(sql, "UPDATE scores SET next_check_at = NOW(3) - INTERVAL 1 SECOND")
    drain(worker, scores)
    last = max(c.pos for c in changes)
    assert len(list(Client(settings=scores).changes(last))) == 20


def test_a_long_stored_result_never_stops_its_row_being_written(settings, make_worker, sql):
    """The application's own 5,000-character value in a TEXT result column: the first check's
    change records it whole, and the row is written. (Before: the feed's VARCHAR(1024) refused
    it, the success became a failure whose record was refused again: the row was never written
    and checked again and again.)"""
    notes = settings.evolve(table="notes", id_column="id", result_column="summary", changes=True,
                            check_kind="batch")  # fmt: skip
    prepare(notes, "CREATE TABLE notes (id BIGINT PRIMARY KEY)", "ALTER TABLE notes MODIFY summary TEXT NULL",
            "INSERT INTO notes (id, summary) SELECT seq, REPEAT('y', 5000) FROM seq_1_to_5")  # fmt: skip
    worker = make_worker(notes, lambda ids: ["short"] * len(ids))
    drain(worker, notes)
    assert scalar(sql, "SELECT MIN(check_count) FROM notes") == 1
    changes = list(Client(settings=notes).changes(0))
    assert [(len(c.old), c.new) for c in changes] == [(5_000, "short")] * 5


def test_a_second_deployment_on_the_same_table_is_refused_its_feed(watched):
    """Issue 45, item 8: a second deployment (its own key prefix) on the same table shared the
    feed: its Client.changes() delivered the other's changes as its own, its trimming kept none
    of its own. The feed's table names the deployment that made it; any other is refused."""
    from recheck.shared.mysql.schema import SchemaProblem, require_table

    other = watched.model_copy(
        update={"deployment": watched.deployment.model_copy(update={"key_prefix": "other"})}
    )
    refused = recheck("init-db", settings=other)
    assert refused.returncode == 1 and "belongs to another recheck deployment" in refused.stdout, (
        refused.stdout
    )
    db = Database(other)
    with pytest.raises(SchemaProblem, match="belongs to another recheck deployment"):
        require_table(other, db)
    db.close()
    with pytest.raises(SchemaProblem, match=r"'t[0-9]+/monitors'"):
        list(Client(settings=other).changes(0))
    assert recheck("init-db", settings=watched).returncode == 0  # its own: ready
    list(Client(settings=watched).changes(0))
