"""Several workloads in one deployment, per-row and adaptive intervals, keys of any kind (issue 10).

Real MariaDB and Redis; workers in-process where a test steers them, real processes where the
deployment is the point.
"""

from __future__ import annotations

import signal
import time

import pytest

from bench.pollcost import handler_reads, status_overhead
from recheck.commands.init_db import init_db
from recheck.shared.redis.connection import connect_redis
from recheck.shared.redis.keys import Keys
from recheck.shared.workloads import read_workloads
from recheck.workers.worker import Worker
from tests.support import checks
from tests.support.helpers import (
    audit_violations,
    best_rate,
    dispatch_all,
    drain,
    fresh_status,
    install_audit,
    make_dispatcher,
    next_in,
    prepare,
    query,
    recheck,
    run_in_thread,
    scalar,
    seed_rows,
    workload,
)
from tests.support.servers import wait_for

UNUSUAL = ["plain", "with space", "a:colon", 'it\'s "quoted"', "emoji 🎉", "tab\there", "x" * 64]


def results(sql, table: str, key: str) -> dict:
    return {row[0]: row[1:] for row in query(sql, f"SELECT `{key}`, status, check_count FROM `{table}`")}


# -- keys of any kind ---------------------------------------------------------------------------
def test_text_keys_of_any_characters_round_trip_through_dispatch_check_and_write_back(
    settings, make_worker, sql
):
    names = workload(settings, "names", table="names", id_column="name")
    values = ", ".join("(%s)" for _ in UNUSUAL)
    prepare(names, "CREATE TABLE names (name VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci "
                   "PRIMARY KEY, note INT)")  # fmt: skip
    with sql.cursor() as cursor:
        cursor.execute(f"INSERT INTO names (name) VALUES {values}", UNUSUAL)
        cursor.execute("UPDATE names SET next_check_at = NOW(3) - INTERVAL 1 SECOND")
    worker = make_worker(names, checks.echo)
    drain(worker, names)
    got = results(sql, "names", "name")
    assert got == {key: (f"str:{key!r}", 1) for key in UNUSUAL}, got
    assert worker.lane(names.name).counters.malformed == 0 and worker.lane(names.name).counters.stale == 0


def test_a_latin1_text_key_is_matched_in_its_own_collation(settings, make_worker, sql):
    codes = workload(settings, "codes", table="codes", id_column="code")
    latin1 = "CHAR(8) CHARACTER SET latin1 COLLATE latin1_general_ci"
    prepare(codes, f"CREATE TABLE codes (code {latin1} PRIMARY KEY)",
            "INSERT INTO codes (code) VALUES ('Straße'), ('café'), ('a b')")  # fmt: skip
    worker = make_worker(codes, checks.echo)
    drain(worker, codes)
    assert results(sql, "codes", "code") == {k: (f"str:{k!r}", 1) for k in ("Straße", "café", "a b")}


def test_binary_keys_and_the_largest_unsigned_bigint_round_trip(settings, make_worker, sql):
    uuids = workload(settings, "uuids", table="uuids", id_column="id")
    keys = [bytes(16), bytes(range(16)), b"\xff" * 15 + b":", b" " * 16]
    prepare(uuids, "CREATE TABLE uuids (id BINARY(16) PRIMARY KEY)")
    with sql.cursor() as cursor:
        cursor.executemany("INSERT INTO uuids (id) VALUES (%s)", [(key,) for key in keys])
        cursor.execute("UPDATE uuids SET next_check_at = NOW(3) - INTERVAL 1 SECOND")
    worker = make_worker(uuids, checks.echo)
    drain(worker, uuids)
    assert results(sql, "uuids", "id") == {k: (f"bytes:{k!r}", 1) for k in keys}

    query(sql, "INSERT INTO user_block_status (user_id, next_check_at) VALUES (18446744073709551615, NOW(3))")
    worker = make_worker(settings, checks.echo)
    drain(worker, settings)
    assert results(sql, "user_block_status", "user_id")[2**64 - 1] == (f"int:{2**64 - 1}", 1)


def test_a_poll_on_text_keys_still_reads_o_page_rows(settings, sql):
    """The keyset cursor walks text keys in the column's order through the (due, id) index."""
    names = workload(settings, "names", table="names", id_column="name", dispatch_batch=100)
    prepare(names, "CREATE TABLE names (name VARCHAR(40) PRIMARY KEY)")
    query(sql, "INSERT INTO names (name, next_check_at) SELECT CONCAT('n', seq), '2020-01-01' FROM "
               "(SELECT a.d * 1000 + b.d * 100 + c.d * 10 + e.d AS seq FROM "
               "(SELECT 0 d UNION SELECT 1 UNION SELECT 2 UNION SELECT 3 UNION SELECT 4 UNION SELECT 5 "
               "UNION SELECT 6 UNION SELECT 7 UNION SELECT 8 UNION SELECT 9) a, "
               "(SELECT 0 d UNION SELECT 1 UNION SELECT 2 UNION SELECT 3 UNION SELECT 4 UNION SELECT 5 "
               "UNION SELECT 6 UNION SELECT 7 UNION SELECT 8 UNION SELECT 9) b, "
               "(SELECT 0 d UNION SELECT 1 UNION SELECT 2 UNION SELECT 3 UNION SELECT 4 UNION SELECT 5 "
               "UNION SELECT 6 UNION SELECT 7 UNION SELECT 8 UNION SELECT 9) c, "
               "(SELECT 0 d UNION SELECT 1 UNION SELECT 2 UNION SELECT 3 UNION SELECT 4 UNION SELECT 5 "
               "UNION SELECT 6 UNION SELECT 7 UNION SELECT 8 UNION SELECT 9) e) AS numbers")  # fmt: skip
    dispatcher = make_dispatcher(names)
    db = dispatcher.pusher.rows.db
    overhead = status_overhead(db)
    seen = []
    for _ in range(20):  # 10,000 rows sharing one due time: each poll still reads one page
        before = handler_reads(db)
        dispatcher.poll()
        after = handler_reads(db)
        seen.append(after[0] - before[0] - overhead[0])
        seen_keys = dispatcher.cursor[1]
    assert max(seen) <= 100 + 2, seen
    assert dispatcher.dispatched == 2000 and seen_keys == sorted(f"n{i}" for i in range(10000))[1999]


# -- per-row and adaptive intervals ---------------------------------------------------------------
def test_an_interval_column_sets_each_rows_rhythm_within_bounds(settings, make_worker, sql):
    urls = workload(settings, "urls", table="urls", id_column="url_id", interval=10, jitter=0,
                    interval_column="every_s", min_interval=2, max_interval=100)  # fmt: skip
    prepare(urls, "CREATE TABLE urls (url_id INT PRIMARY KEY, every_s DECIMAL(8, 3) NULL)",
            "INSERT INTO urls (url_id, every_s) VALUES (1, 3.5), (2, NULL), (3, 1000), (4, 0)")  # fmt: skip
    drain(make_worker(urls, checks.ok), urls)
    assert next_in(sql, "urls", "url_id") == {1: 3.5, 2: 10.0, 3: 100.0, 4: 2.0}


EXTREMES = {  # the interval column's type: (its largest value, its smallest)
    "BIGINT": ("9223372036854775807", "-9223372036854775808"),
    "BIGINT UNSIGNED": ("18446744073709551615", "0"),
    "DOUBLE": ("1e308", "-1e308"),
    "DECIMAL(65, 0)": ("9" * 65, "-" + "9" * 65),
}


@pytest.mark.parametrize("column", EXTREMES)
def test_no_interval_column_value_can_break_a_write_back(settings, make_worker, sql, column):
    """A "never" of 2^63 - 1 made MySQL refuse the whole batch's write (error 1690) at every try."""
    largest, smallest = EXTREMES[column]
    urls = workload(settings, "urls", table="urls", id_column="url_id", interval=10, jitter=0,
                    interval_column="every_s", min_interval=2, max_interval=100)  # fmt: skip
    rows = f"(1, {largest}), (2, {smallest}), (3, NULL), (4, 5)"
    prepare(urls, f"CREATE TABLE urls (url_id INT PRIMARY KEY, every_s {column} NULL)",
            f"INSERT INTO urls (url_id, every_s) VALUES {rows}")  # fmt: skip
    drain(make_worker(urls, checks.ok), urls)
    assert next_in(sql, "urls", "url_id") == {1: 100.0, 2: 2.0, 3: 10.0, 4: 5.0}


def test_a_check_decides_when_its_row_is_due_again(settings, make_worker, sql):
    adaptive = workload(settings, "adaptive", table="adaptive", id_column="id", interval=10, jitter=0,
                        min_interval=2, max_interval=100)  # fmt: skip
    prepare(adaptive, "CREATE TABLE adaptive (id INT PRIMARY KEY)",
            "INSERT INTO adaptive (id) VALUES (1), (2), (3), (4), (5)")  # fmt: skip

    def decide(ids):
        plan = {1: checks.Recheck("down", after=7), 2: checks.Recheck("x", after=0.5), 3: "plain",
                4: checks.Recheck("y", after=10_000), 5: ValueError("boom")}  # fmt: skip
        return [plan[i] for i in ids]

    drain(make_worker(adaptive, decide), adaptive)
    got = next_in(sql, "adaptive", "id")
    assert {k: got[k] for k in (1, 2, 3, 4)} == {1: 7.0, 2: 2.0, 3: 10.0, 4: 100.0}
    assert query(sql, "SELECT status, fail_count FROM adaptive WHERE id = 1")[0] == ("down", 0)
    # A failure keeps the row's rhythm: due again after the workload's interval.
    retry = scalar(sql, "SELECT TIMESTAMPDIFF(MICROSECOND, checked_at, next_check_at) / 1e6 FROM adaptive "
                        "WHERE id = 5 AND fail_count = 1")  # fmt: skip
    assert float(retry) == 10.0


# -- one worker, several workloads ------------------------------------------------------------------
def busy_tables(settings, count: int = 40_000):
    """Two int-keyed workloads with more due rows than a worker can check while the test runs."""
    made = []
    for name, weight in (("heavy", 3), ("light", 1)):
        # Fixed takes of 50: turns are counted in rows, and takes grown to 4,000 would make the
        # few seconds this test measures a handful of turns, too coarse to see a 3:1 share.
        w = workload(settings, name, table=f"{name}_rows", weight=weight, worker_batch=50, worker_take_max=50,
                     high_water=50_000, check="tests.support.checks:sleepy_batch")  # fmt: skip
        assert init_db(w, apply=False, say=lambda _: None, create=True) == 0
        seed_rows(w, count, due_now=True)
        dispatch_all(w)
        made.append(w)
    return made


def checked(sql, table: str) -> int:
    return int(scalar(sql, f"SELECT COALESCE(SUM(check_count), 0) FROM `{table}`"))


@pytest.mark.alone  # rates in two windows compared: a neighbour starting between them skews it
def test_a_worker_shares_its_time_by_weight_and_gives_it_all_to_whoever_has_work(settings, sql):
    heavy, light = busy_tables(settings)
    worker = Worker([heavy, light])
    thread = run_in_thread(worker)
    try:
        wait_for(lambda: checked(sql, "heavy_rows") > 0 and checked(sql, "light_rows") > 0, 20, "both")
        start = {"heavy": checked(sql, "heavy_rows"), "light": checked(sql, "light_rows")}
        time.sleep(4)
        shares = {
            "heavy": checked(sql, "heavy_rows") - start["heavy"],
            "light": checked(sql, "light_rows") - start["light"],
        }
        ratio = shares["heavy"] / max(shares["light"], 1)
        assert 2.4 <= ratio <= 3.6, shares
        # The heavy workload runs dry: the light one gets the whole worker.
        query(sql, "UPDATE heavy_rows SET next_check_at = NOW(3) + INTERVAL 1 HOUR")
        worker.lane(heavy.name).store.client.delete(Keys.of(heavy).queue)
        time.sleep(1)
        together = (shares["heavy"] + shares["light"]) / 4
        # Alone, 0.84-1.08x of both together (three runs by itself, 2026-11-30; 0.96-0.99x in three
        # more that afternoon; 0.94x on the slowest VM yet, 2026-12-01); 0.58x once beside another
        # serial test on a VM half as fast, 0.46x and 0.39x in CI rehearsals beside one (2026-11-30,
        # 12-01: a neighbour that starts after the shared window slows every window after it),
        # hence the `alone` layer. A dry workload keeping its weight-3 turns would leave the
        # light one about a quarter of the worker, its rate while sharing: the best of up to three
        # 3 s windows, and at least 1.6 times that rate (0.4 of both together).
        alone = best_rate(lambda: checked(sql, "light_rows"), 3, 0.7 * together)
        assert alone >= 0.4 * together, (alone, together)
        print(f"weights 3:1 for 4 s: {shares} ({ratio:.2f}:1)")
        print(f"light alone {alone:,.0f} checks/s, both together {together:,.0f} checks/s")
    finally:
        worker.stop()
        thread.join(15)


# -- a deployment of three workloads, as processes ----------------------------------------------------
DEPLOYMENT = """
[workloads.ticks]
table = "ticks"
id_column = "id"
interval = 1
check = "tests.support.checks:ok"

[workloads.devices]
table = "devices"
id_column = "uuid"
interval = 3
interval_column = "every_s"
check = "tests.support.checks:async_ok"
concurrency = 20

[workloads.tokens]
table = "tokens"
id_column = "token"
interval = 30
check = "tests.support.checks:recheck_by_key"
"""


def three_workloads(settings, tmp_path, sql, due_in: str = "3 SECOND"):
    """ticks: int keys, 1 s, batch; devices: CHAR(36) UUIDs, 1 or 3 s by column, per-row async;
    tokens: VARBINARY(16), 1 or 2 s as the check decides. Each with an audit trail, every row
    due `due_in` from now (a MySQL interval)."""
    (tmp_path / "recheck.toml").write_text(DEPLOYMENT)
    env = {"RECHECK_CONFIG": str(tmp_path / "recheck.toml")}
    base = settings.evolve(**{"config": str(tmp_path / "recheck.toml")})
    ticks, devices, tokens = read_workloads(base)
    prepare(ticks, "CREATE TABLE ticks (id BIGINT PRIMARY KEY)",
            "INSERT INTO ticks (id) VALUES " + ", ".join(f"({i})" for i in range(-20, 20)))  # fmt: skip
    prepare(devices, "CREATE TABLE devices (uuid CHAR(36) PRIMARY KEY, every_s INT NULL)",
            "INSERT INTO devices (uuid, every_s) VALUES " + ", ".join(
                f"(UUID(), {1 if i % 2 else 'NULL'})" for i in range(30)))  # fmt: skip
    tokens_sql = ", ".join(f"(UNHEX('{i:032x}'))" for i in range(30))
    prepare(tokens, "CREATE TABLE tokens (token VARBINARY(16) PRIMARY KEY)",
            f"INSERT INTO tokens (token) VALUES {tokens_sql}")  # fmt: skip
    for w in (ticks, devices, tokens):
        install_audit(sql, w, audit=f"audit_{w.table}")
        query(sql, f"UPDATE `{w.table}` SET next_check_at = NOW(3) + INTERVAL {due_in}")  # start together
    return (ticks, devices, tokens), env


def test_three_workloads_in_one_deployment_each_keep_their_own_rhythm(settings, sql, tmp_path, procs):
    workloads, env = three_workloads(settings, tmp_path, sql, due_in="1 HOUR")
    for role in ("dispatcher", "worker"):
        procs.wait_started(procs.start(role, settings, env=env))
    # Every table's rows come due together at `started`, 3 s after both processes are up: their
    # start-up took 6 s once in a CI run beside other tests, and rows due before it were counted
    # as checks missed. Once all three have been checked, a sampling period of 4.5 rhythms of
    # 1 s, 2.25 of 2 s, 1.5 of 3 s (half a rhythm past a due time: a row's count is then one more
    # than its whole rhythms, not on the edge).
    started = scalar(sql, "SELECT NOW(3) + INTERVAL 3 SECOND")
    for w in workloads:
        query(sql, f"UPDATE `{w.table}` SET next_check_at = %s", (started,))
    wait_for(lambda: all(checked(sql, t) > 0 for t in ("ticks", "devices", "tokens")), 20, "first checks")
    time.sleep(4.5)
    rhythms = {  # each row's rhythm in seconds, per table
        "ticks": "1",
        "devices": "IF(every_s IS NULL, 3, every_s)",
        "tokens": "IF(ASCII(RIGHT(token, 1)) %% 2 = 0, 1, 2)",  # %% : the query has parameters
    }
    report = {}
    for table, rhythm in rhythms.items():
        violations = audit_violations(sql, f"audit_{table}")
        assert violations["double"] == 0 and violations["premature"] == 0, (table, violations)
        since = "TIMESTAMPDIFF(MICROSECOND, %s, NOW(3)) / 1e6"
        rows = query(sql, f"SELECT {rhythm}, check_count, {since} FROM `{table}`", (started,))
        off = []
        for every, count, elapsed in rows:
            due_times = float(elapsed) / float(every)  # how many times it fell due
            off.append(count - due_times)
        report[table] = (min(off), max(off), len(rows))
        assert all(-1.5 <= o <= 1.0 for o in off), (table, sorted(off)[:3], sorted(off)[-3:])
    statuses = fresh_status(settings, env)
    assert set(statuses["workloads"]) == {"ticks", "devices", "tokens"}, statuses
    print(report)


@pytest.mark.parametrize("idle_poll_interval", [0.02, 5.0])
def test_two_dispatchers_split_the_workloads_and_take_over_each_others(
    make_settings, sql, tmp_path, procs, idle_poll_interval
):
    """Also with idle probes 5 s apart: a dispatcher whose workloads have nothing due still looks
    for free leases every heartbeat (its idle pause ends at the next beat)."""
    settings = make_settings(leader_ttl=1.0, idle_poll_interval=idle_poll_interval)
    (ticks, devices, tokens), env = three_workloads(settings, tmp_path, sql)
    first = procs.start("dispatcher", settings, env=env)
    second = procs.start("dispatcher", settings, env=env)
    client = connect_redis(settings.deployment)

    def leaders() -> dict:
        return {w.name: (client.get(Keys.of(w).leader) or b"").decode() for w in (ticks, devices, tokens)}

    def pid_of(holder: str) -> int:
        return int(holder.split("-")[-2]) if holder else 0

    wait_for(lambda: {pid_of(h) for h in leaders().values()} == {first.pid, second.pid}, 20, "a split")
    first.send_signal(signal.SIGKILL)
    first.wait()
    killed = time.monotonic()
    wait_for(lambda: {pid_of(h) for h in leaders().values()} == {second.pid}, 20, "the survivor leads all")
    assert (
        time.monotonic() - killed
        <= 2 * settings.deployment.leader_ttl + 2 * settings.deployment.heartbeat_interval + 1
    )


@pytest.mark.parametrize("spelling", ["socket", "localhost"])
def test_one_table_reached_by_two_spellings_of_its_server_is_refused(settings, mariadb, tmp_path, spelling):
    """127.0.0.1:PORT, localhost:PORT and the server's socket are one server: two workloads there on
    one table would check every row twice per due time. The check asks the servers what they are."""
    database = settings.mysql.database
    other = {
        "socket": f"mysql://root@localhost/{database}?unix_socket={mariadb.socket}",
        "localhost": f"mysql://root@localhost:{mariadb.port}/{database}",
    }[spelling]
    assert "127.0.0.1" in settings.mysql_url
    (tmp_path / "recheck.toml").write_text(
        f'[workloads.tcp]\ntable = "user_block_status"\n\n'
        f'[workloads.{spelling}]\ntable = "user_block_status"\nmysql_url = "{other}"\n'
    )
    env = {"RECHECK_CONFIG": str(tmp_path / "recheck.toml")}
    config = recheck("config", settings=settings, env=env)
    assert config.returncode == 2, config.stdout + config.stderr
    assert f"workload '{spelling}' keeps the same table as workload 'tcp'" in config.stdout
    worker = recheck("worker", settings=settings, env=env)
    assert worker.returncode == 2 and "keeps the same table as workload 'tcp'" in worker.stderr, worker.stderr


# -- commands, per workload ---------------------------------------------------------------------
def test_commands_name_their_workload_when_there_are_several(settings, sql, tmp_path):
    _, env = three_workloads(settings, tmp_path, sql)
    assert recheck("init-db", settings=settings, env=env).returncode == 0  # every workload's table
    refused = recheck("release", "1", settings=settings, env=env)
    assert refused.returncode == 2 and "--workload NAME" in refused.stderr
    query(
        sql, "UPDATE ticks SET next_check_at = '9999-12-31', last_error = 'quarantined: test' WHERE id = -5"
    )
    released = recheck("release", "--workload", "ticks", "-5", settings=settings, env=env)
    assert released.returncode == 0 and "released, due now: -5" in released.stdout, released.stderr
    text = recheck("status", "--workload", "devices", settings=settings, env=env).stdout
    assert "workload devices:" not in text and ".devices every 1-3 s" in text.splitlines()[0]
    every = recheck("status", settings=settings, env=env).stdout
    assert all(f"workload {name}:" in every for name in ("ticks", "devices", "tokens"))
    bad = recheck("status", "--workload", "nope", settings=settings, env=env)
    assert bad.returncode == 2 and "unknown workload" in bad.stderr


@pytest.mark.parametrize("key", ["id", "uuid"])
def test_release_understands_the_key_kind(settings, sql, key):
    names = workload(settings, "names", table="names", id_column=key)
    kind = "BIGINT" if key == "id" else "CHAR(36)"
    prepare(names, f"CREATE TABLE names (`{key}` {kind} PRIMARY KEY)",
            f"INSERT INTO names (`{key}`) VALUES ('7')")  # fmt: skip
    query(sql, "UPDATE names SET next_check_at = '9999-12-31'")
    env = {"RECHECK_TABLE": "names", "RECHECK_ID_COLUMN": key}
    result = recheck("release", "7", settings=settings, env=env)
    assert result.returncode == 0 and "released, due now: 7" in result.stdout, result.stderr
