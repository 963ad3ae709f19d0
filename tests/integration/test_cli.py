"""The `recheck` command as a user runs it: a subprocess with RECHECK_* variables."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import sys
import time

import pytest

from tests.support.helpers import REPO, only_workload, query, recheck, scalar
from tests.support.servers import wait_for


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("RECHECK_INTERVAL", "-1"),
        ("RECHECK_INTERVAL", "ten"),
        ("RECHECK_TABLE", "users`; DROP TABLE users; --"),
        ("RECHECK_WORKER_BATCH", "0"),
        ("RECHECK_CHECK", "not a reference"),
        ("RECHECK_LOG_FORMAT", "xml"),
    ],
)
def test_a_bad_value_exits_2_with_one_line_naming_the_variable(variable, value):
    result = recheck("status", env={variable: value})
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert variable in lines[0] and "configuration error" in lines[0]


def test_a_bad_url_is_reported_without_its_password():
    result = recheck("status", env={"RECHECK_MYSQL_URL": "postgres://app:hunter2@db/x"})
    assert result.returncode == 2
    assert "RECHECK_MYSQL_URL" in result.stderr and "hunter2" not in result.stderr


@pytest.mark.parametrize(
    ("variable", "url"),
    [
        ("RECHECK_REDIS_URL", "redis://:s3cr#etpw@127.0.0.1:6379/0"),
        ("RECHECK_MYSQL_URL", "mysql://root:s3cr/etpw@127.0.0.1:3306/recheck"),
        ("RECHECK_MYSQL_URL", "mysql://root:s3cr?etpw@127.0.0.1:3306/recheck"),
    ],
)
def test_a_password_with_unencoded_special_characters_is_one_line_and_never_shown(variable, url):
    """'#', '/' and '?' end a URL's user part early: the password's tail then looked like a port,
    and status, config and the dispatcher died with a traceback printing it."""
    for command in ("status", "config", "dispatcher"):
        result = recheck(command, env={variable: url})
        output = result.stdout + result.stderr
        assert result.returncode == 2, (command, output)
        assert "s3cr" not in output and "etpw" not in output, (command, output)
        assert f"{variable}: cannot be read for sure: percent-encode" in result.stderr, (command, output)
        assert "Traceback" not in output


def test_an_unimportable_check_exits_2_with_the_reason(settings):
    result = recheck("worker", settings=settings, env={"RECHECK_CHECK": "no_such_package.mod:check"})
    assert result.returncode == 2
    assert "RECHECK_CHECK=no_such_package.mod:check" in result.stderr
    assert "No module named 'no_such_package'" in result.stderr


def test_init_db_is_idempotent(make_settings):
    settings = make_settings()
    first, second = recheck("init-db", settings=settings), recheck("init-db", settings=settings)
    assert first.returncode == 0 and second.returncode == 0
    assert "is ready" in second.stdout


def test_init_db_prints_the_alter_an_existing_table_needs_and_applies_it_on_request(settings, sql):
    query(
        sql, "CREATE TABLE devices (device_id INT UNSIGNED PRIMARY KEY, name VARCHAR(40), status VARCHAR(20))"
    )
    env = {"RECHECK_TABLE": "devices", "RECHECK_ID_COLUMN": "device_id"}
    refused = recheck("init-db", settings=settings, env=env)  # its own `status`: not taken unasked
    assert refused.returncode == 1 and "--adopt status" in refused.stdout
    dry = recheck("init-db", "--adopt", "status", settings=settings, env=env)
    assert dry.returncode == 1
    expected = [
        "ADD COLUMN `checked_at`",
        "ADD COLUMN `next_check_at` DATETIME(3) NOT NULL",
        "ADD COLUMN `check_count`",
        "ADD COLUMN `fail_count`",
        "ADD COLUMN `last_error`",
        "ADD KEY `recheck_due` (`next_check_at`, `device_id`)",
    ]
    for clause in expected:
        assert clause in dry.stdout
    assert "ADD COLUMN `status`" not in dry.stdout  # it exists already
    worker = recheck("worker", settings=settings, env=env)
    assert worker.returncode == 1 and "`recheck init-db" in worker.stderr
    applied = recheck("init-db", "--apply", "--adopt", "status", settings=settings, env=env)
    assert applied.returncode == 0, applied.stderr
    assert "is ready" in recheck("init-db", settings=settings, env=env).stdout


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("hosts (hostname TEXT, PRIMARY KEY (hostname(50)))", "recheck keys on an integer, a CHAR/VARCHAR"),
        ("money (id DECIMAL(12, 0) PRIMARY KEY)", "recheck keys on an integer"),
        ("pairs (id INT, part INT, PRIMARY KEY (id, part))", "has a composite primary key (id, part)"),
        ("loose (id INT)", "has no primary key"),
        ("other (code INT PRIMARY KEY, id INT UNIQUE)", "is not the primary key; set RECHECK_ID_COLUMN=code"),
    ],
)
def test_init_db_refuses_a_table_it_cannot_use(settings, sql, table, message):
    query(sql, f"CREATE TABLE {table}")
    name, id_column = table.split()[0], "hostname" if table.startswith("hosts") else "id"
    env = {"RECHECK_TABLE": name, "RECHECK_ID_COLUMN": id_column}
    result = recheck("init-db", settings=settings, env=env)
    assert result.returncode == 1
    assert message in result.stdout, result.stdout


def test_seed_spreads_due_times_over_one_interval_or_makes_them_due_now(make_settings, sql):
    settings = make_settings(interval=10)
    result = recheck("seed", "--rows", "1000", settings=settings)
    assert result.returncode == 0, result.stderr
    assert "inserted ids 1..1,000" in result.stdout
    spread = scalar(sql, "SELECT TIMESTAMPDIFF(MICROSECOND, MIN(next_check_at), MAX(next_check_at)) / 1e6 "
                         "FROM user_block_status")  # fmt: skip
    assert 9.9 <= float(spread) <= 10.0
    assert recheck("seed", "--rows", "500", "--due-now", settings=settings).returncode == 0
    assert (
        scalar(sql, "SELECT COUNT(DISTINCT next_check_at) FROM user_block_status WHERE user_id > 1000") == 1
    )
    assert recheck("seed", "--rows", "0", settings=settings).returncode == 2  # argparse: must be >= 1


def test_status_json_and_text(settings, sql, procs):
    recheck("seed", "--rows", "300", "--due-now", settings=settings)
    query(sql, "UPDATE user_block_status SET next_check_at = IF(user_id <= 100, NOW(3) - INTERVAL 5 SECOND, "
               "NOW(3) + INTERVAL 1 HOUR)")  # fmt: skip
    made_due = time.monotonic()
    facts = only_workload(recheck("status", "--json", settings=settings).stdout)
    assert (facts["rows"], facts["due_now"], facts["overdue_1s"]) == (300, 100, 100)
    assert facts["live_workers"] == 0 and not facts["fresh"]
    # 5 s late when made due, plus however long the command took to start (seconds on a busy CI)
    assert 5 <= facts["oldest_lateness_s"] <= 5 + (time.monotonic() - made_due) + 0.1
    text = recheck("status", settings=settings).stdout
    assert "100 rows overdue by more than 1 s" in text
    assert "no live workers; no live dispatcher" in text


def test_run_supervises_and_stops_gracefully_with_a_freshness_summary(make_settings):
    settings = make_settings(interval=2.0)
    recheck("seed", "--rows", "2000", settings=settings)
    result = recheck("run", "--workers", "2", "--duration", "7", settings=settings, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "not attempted in the last 3 s: 0; failing now: 0" in result.stdout, result.stdout
    assert "every row fresh" in result.stdout
    assert result.stderr.count("worker") >= 2 and "stopped:" in result.stderr


def test_ctrl_c_on_a_terminal_stops_run_gracefully_with_its_summary(make_settings):
    # A real terminal: Ctrl-C is the terminal's SIGINT to the whole foreground process group.
    settings = make_settings(interval=2.0)
    recheck("seed", "--rows", "500", settings=settings)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RECHECK_")}
    env.update(settings.env_overrides(), PYTHONPATH=str(REPO))
    pid, terminal = pty.fork()
    if pid == 0:  # the child: `recheck run` on the terminal
        os.execve(sys.executable, [sys.executable, "-m", "recheck", "run", "--workers", "1"], env)
    # Typed once rows are being checked: the dispatcher and the worker both serve (a loaded
    # machine may show "workers 1" before the dispatcher has started).
    shown = read_terminal(terminal, until=re.compile(rb"\]\s+[1-9][\d,]* checks/s"), seconds=30)
    os.write(terminal, b"\x03")  # Ctrl-C, typed
    shown += read_terminal(terminal, until=None, seconds=30)
    _, status = os.waitpid(pid, 0)
    text = shown.decode(errors="replace")
    assert os.waitstatus_to_exitcode(status) == 0, text
    assert "^C" in text and "checks written" in text and "now: every row fresh" in text, text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text


def read_terminal(terminal: int, until: re.Pattern | None, seconds: float) -> bytes:
    """What the terminal shows until `until` matches it (None: until the program ends)."""
    shown, deadline = b"", time.monotonic() + seconds
    while time.monotonic() < deadline and (until is None or not until.search(shown)):
        if select.select([terminal], [], [], 0.2)[0]:
            try:
                data = os.read(terminal, 65536)
            except OSError:  # the program ended and closed the terminal
                break
            if not data:
                break
            shown += data
    return shown


@pytest.mark.serial  # timing: serial layer (make test)
def test_run_restarts_a_crashed_worker_and_the_poison_id_is_quarantined(make_settings, sql, procs):
    settings = make_settings(interval=2.0, max_reclaims=3)
    # 24 rows: the poison id dies in the first take, in a group of 3, then alone twice (4 deaths,
    # restarted after 0.5, 1, 2 and 4 s). The run goes on until the poison id is quarantined and
    # every other row checked and on time again (a CI runner's workers took 1-2 s each to
    # start), then is stopped as an operator would: its summary must find the table fresh.
    recheck("seed", "--rows", "24", "--due-now", settings=settings)
    env = {"RECHECK_CHECK": "tests.support.checks:poison", "TEST_CHECK_POISON": "7"}
    run = procs.start("recheck", settings, "run", "--workers", "1", env=env)  # python -m recheck run

    def quarantined_and_the_rest_fresh() -> bool:
        behind = scalar(
            sql,
            "SELECT COUNT(*) FROM user_block_status WHERE user_id <> 7 "
            "AND (check_count = 0 OR next_check_at < NOW(3) - INTERVAL 1 SECOND)",
        )
        return "quarantined ids 7" in procs.log_of(run) and behind == 0

    wait_for(quarantined_and_the_rest_fresh, 60, "the poison quarantined, the rest fresh", interval=0.2)
    run.send_signal(signal.SIGTERM)
    assert run.wait(timeout=30) == 0, procs.log_of(run)
    said = procs.log_of(run)  # its summary (stdout) and the children's logs (stderr)
    assert said.count("worker 0 exited with code 99") >= 3, said
    assert "every row fresh" in said, said
    due, error = query(sql, "SELECT next_check_at, last_error FROM user_block_status WHERE user_id = 7")[0]
    assert due.year == 9999 and error.startswith("quarantined")


def test_json_logs_are_one_object_per_line_without_secrets(settings, procs):
    proc = procs.start("worker", settings, env={"RECHECK_LOG_FORMAT": "json"})
    wait_for(lambda: "started" in procs.log_of(proc), 15, "the worker to start")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=15) == 0
    events = [json.loads(line) for line in procs.log_of(proc).splitlines() if line.strip()]
    assert [e["msg"].split(" ")[0] for e in events if e["level"] == "info"][:1] == ["worker"]
    assert all({"ts", "level", "role", "pid", "msg"} <= set(e) for e in events)
    assert any("stopped:" in e["msg"] for e in events)
