"""Operators' questions (issue 14): one row's story, failures grouped by error, the effective
configuration, and the alert rules checked by Prometheus's own tool.

Run with `-s` to see an `inspect` output for a queued, an in-flight, a failing and a
quarantined row.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from recheck.shared.core.failures import error_group
from recheck.shared.mysql.db import Database
from recheck.shared.redis.store import MAX_ERROR_GROUPS
from recheck.shared.views.status import Sampler, error_groups
from tests.support import checks
from tests.support.helpers import (
    REPO,
    dispatch_all,
    make_dispatcher,
    make_store,
    only_workload,
    prepare,
    query,
    recheck,
    seed_rows,
)

PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
RULES = REPO / "deploy" / "prometheus"


def inspect(settings, key: str, *extra: str) -> subprocess.CompletedProcess:
    return recheck("inspect", key, *extra, settings=settings)


def story(settings, key: str) -> dict:
    """The row's story as JSON; the text an operator reads is printed too (see `-s`)."""
    result = inspect(settings, key, "--json")
    assert result.returncode == 0, result.stderr
    print(inspect(settings, key).stdout)
    return json.loads(result.stdout)


def test_inspect_tells_one_rows_story_wherever_it_is(settings, make_worker, sql):
    seed_rows(settings, 12, due_now=True)
    query(sql, "UPDATE user_block_status SET next_check_at = NOW(3) + INTERVAL 1 HOUR WHERE user_id = 12")
    query(sql, "UPDATE user_block_status SET next_check_at = '9999-12-31', "
               "last_error = 'quarantined: killed its worker 3 times' WHERE user_id = 11")  # fmt: skip
    make_dispatcher(settings).poll()  # ids 1..10 queued, oldest first

    queued = story(settings, "3")
    assert queued["state"] == "queued" and "queued at position 3 of 10" in queued["where"], queued

    worker = make_worker(settings, checks.ok)
    held = worker.lane(settings.name).intake.take(2)  # ids 1 and 2 taken, not yet written
    in_flight = story(settings, "1")
    assert in_flight["state"] == "in_flight" and f"with worker {worker.id} (alive)" in in_flight["where"]

    def fails_on_five(ids):
        return [ValueError("upstream said 503 for user 5") if i == 5 else "ok" for i in ids]

    failing_worker = make_worker(settings, fails_on_five)
    failing_worker.lane(settings.name).batch.process(failing_worker.lane(settings.name).intake.take(8))
    failing = story(settings, "5")
    assert (failing["fail_count"], failing["check_count"]) == (1, 0)
    assert failing["last_error"] == "ValueError: upstream said 503 for user 5"
    assert failing["state"] in ("waiting", "due", "overdue")  # its retry backoff is 0.2 s here

    quarantined = story(settings, "11")
    assert quarantined["state"] == "quarantined" and quarantined["release"] == "recheck release 11"
    waiting = story(settings, "12")
    assert waiting["state"] == "waiting" and waiting["late_s"] < -3500
    worker.lane(settings.name).batch.process(held)
    missing = inspect(settings, "999")
    assert missing.returncode == 1 and "no row with id '999'" in missing.stderr
    assert inspect(settings, "abc").returncode == 2  # not an integer id


def test_inspect_finds_a_row_in_redis_as_its_column_collation_finds_it_in_mysql(settings, sql):
    """'alice' and 'Alice  ' are the row 'Alice' on a case-insensitive, pad-space key; Redis knows
    it by its stored key, so the lookup there must use the key as MySQL returns it."""
    names = settings.evolve(**{"table": "names", "id_column": "name"})
    prepare(names, "CREATE TABLE names (name VARCHAR(40) COLLATE utf8mb4_general_ci PRIMARY KEY)",
            "INSERT INTO names (name) VALUES ('Alice'), ('Bob')")  # fmt: skip
    make_dispatcher(names).poll()
    env = {"RECHECK_TABLE": "names", "RECHECK_ID_COLUMN": "name"}
    for typed in ("Alice", "alice", "Alice  ", "ALICE"):
        result = recheck("inspect", typed, "--json", settings=settings, env=env)
        assert result.returncode == 0, result.stderr
        told = json.loads(result.stdout)
        assert told["id"] == "Alice" and told["state"] == "queued", (typed, told)


def test_failures_are_grouped_by_error_without_scanning_the_table(settings, make_worker, sql):
    seed_rows(settings, 40, due_now=True)
    dispatch_all(settings)
    worker = make_worker(settings, checks.odd_fails)  # odd ids fail: "ValueError: odd id 7", ...
    worker.lane(settings.name).poll()
    facts = only_workload(recheck("status", "--json", settings=settings).stdout)
    groups = {group["error"]: group for group in facts["errors"]}
    assert list(groups) == ["ValueError: odd id N"], groups
    group = groups["ValueError: odd id N"]
    assert group["count"] == 20 and len(group["examples"]) == 5
    assert all(int(example) % 2 for example in group["examples"])
    assert group["first_seen"] <= group["last_seen"]
    text = recheck("status", settings=settings).stdout
    assert "failures in the last hour, by error:" in text and "20x  ValueError: odd id N" in text


def test_a_new_error_always_gets_a_group_whatever_filled_them(settings):
    """Messages the normaliser cannot collapse (words, URLs) used to fill the 50 groups and send a
    new error to "(other errors)" for a day: now the group seen least recently makes room."""
    store = make_store(settings)
    letters = "abcdefghijklmnopqrstuvwxyz"
    for n in range(MAX_ERROR_GROUPS):  # 50 groups of words: nothing to mask
        store.record_errors({f"ProbeError: {letters[n % 26]}{letters[n // 26]} down": (2, [])}, 1000.0 + n)
    store.record_errors({"TimeoutError: brand new": (1, ["7"])}, 2000.0)
    groups = store.error_groups()
    assert len(groups) == MAX_ERROR_GROUPS + 1  # the catch-all besides
    new = groups["TimeoutError: brand new"]
    assert (new["count"], new["examples"]) == (1, ["7"])
    assert "ProbeError: aa down" not in groups  # the least recently seen made room
    assert groups["(other errors)"]["count"] == 2
    assert "TimeoutError: brand new" in {g.error for g in error_groups(store.error_groups(), now=2000.0)}
    assert store.prune_errors(older_than=1500.0) == MAX_ERROR_GROUPS - 1  # not seen since: forgotten
    assert set(store.error_groups()) == {"TimeoutError: brand new", "(other errors)"}


def test_an_error_group_shows_each_id_once_and_a_traceback_on_one_line(settings):
    """Issue 32: examples repeated an id seen again ("e.g. 180709, 180645, 180709"), and a
    multi-line message broke status's error table."""
    store = make_store(settings)
    message = error_group("Traceback (most recent call last):\n  File 'probe.py', line 4\nValueError: 7")
    assert "\n" not in message and message.startswith("Traceback (most recent call last): File")
    store.record_errors({message: (2, ["180709", "180645"])}, 1000.0)
    store.record_errors({message: (1, ["180709"])}, 1001.0)
    assert store.error_groups()[message]["examples"] == ["180645", "180709"]  # the latest last, once


def test_a_sample_never_shows_more_paused_rows_than_rows(settings, sql):
    """The row count is refreshed every 30 s, paused rows every sample: rows inserted and paused
    between two counts showed more paused rows than rows (issue 32)."""
    seed_rows(settings, 10)
    sampler = Sampler(settings, Database(settings), make_store(settings))
    assert sampler.sample().rows == 10
    paused = (
        "INSERT INTO user_block_status (user_id, next_check_at) SELECT seq, '9999-12-30' FROM seq_11_to_40"
    )
    query(sql, paused)  # 30 more rows, all paused
    facts = sampler.sample()
    assert facts.paused == 30 and facts.rows == 40


def test_urls_in_errors_are_one_group(settings):
    assert error_group("ConnectError: https://a.example/x?id=1 refused") == error_group(
        "ConnectError: http://b.example.org/y refused"
    )


def test_config_shows_each_value_and_where_it_came_from_with_secrets_hidden(settings, tmp_path, mariadb):
    (tmp_path / ".env").write_text("RECHECK_WORKER_BATCH=321\n")
    (tmp_path / "recheck.toml").write_text('[workloads.users]\ntable = "user_block_status"\ninterval = 7\n')
    secret_url = settings.mysql_url.replace("root@", "root:@")
    env = {
        "RECHECK_CONFIG": str(tmp_path / "recheck.toml"),
        "RECHECK_REDIS_URL": settings.deployment.redis_url + "?password=",
        "RECHECK_MYSQL_URL": secret_url,
        "RECHECK_APP_USER": "app",
        "RECHECK_APP_PASSWORD": "hunter2",
    }
    settings_env = {k: v for k, v in settings.env_overrides().items() if k != "RECHECK_WORKER_BATCH"}
    result = recheck("config", "--json", env={**settings_env, **env}, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    shown = json.loads(result.stdout)
    rows = {row["setting"]: row for row in shown["workloads"][0]["settings"]}
    assert rows["interval"] == {
        "setting": "interval",
        "value": "7.0",
        "source": f"{tmp_path / 'recheck.toml'} [workloads.users]",
    }
    assert rows["worker_batch"]["value"] == "321" and rows["worker_batch"]["source"] == ".env"
    assert rows["check"]["source"] == "environment" or rows["check"]["source"] == "default"
    assert rows["app_password"]["value"] == "***" and "hunter2" not in result.stdout
    assert shown["ready"] and shown["problems"] == []
    text = recheck("config", env={**settings_env, **env}, cwd=tmp_path).stdout
    assert "every server reachable, every table ready" in text


def test_config_says_what_is_not_ready_and_what_is_wrong(settings, tmp_path):
    missing = recheck("config", settings=settings, env={"RECHECK_TABLE": "no_such_table"})
    assert missing.returncode == 1
    assert "problem: workload default: table" in missing.stdout and "does not exist" in missing.stdout
    bad = recheck("config", settings=settings, env={"RECHECK_INTERVAL": "-1"})
    assert bad.returncode == 2 and "RECHECK_INTERVAL" in bad.stderr
    assert recheck("--version").stdout.startswith("recheck ")


def test_config_imports_each_check_as_its_workers_will_and_names_where_a_bad_one_came_from(
    settings, tmp_path
):
    # An application's folder: a good check, one whose dependency is not installed, and a
    # workloads file with a misspelt module name, as a new user writes them.
    app = tmp_path / "uptime_app"
    app.mkdir()
    (app / "__init__.py").write_text("")
    (app / "checks.py").write_text("async def check(row):\n    return 'up'\n")
    (app / "needs_httpx.py").write_text("import httpx_not_installed_here\n\ndef check(ids):\n    return 1\n")
    env = {"PYTHONPATH": f"{tmp_path}:{REPO}"}
    good = recheck("config", settings=settings, env={**env, "RECHECK_CHECK": "uptime_app.checks:check"})
    assert good.returncode == 0, good.stdout + good.stderr
    assert "the check imports: a per-row check (async)" in good.stdout

    unmet = recheck("config", settings=settings, env={**env, "RECHECK_CHECK": "uptime_app.needs_httpx:check"})
    assert unmet.returncode == 2, unmet.stdout
    said = "configuration error: workload default: RECHECK_CHECK=uptime_app.needs_httpx:check: cannot import"
    assert said in unmet.stdout and "No module named 'httpx_not_installed_here'" in unmet.stdout
    assert "every server reachable" not in unmet.stdout

    toml = tmp_path / "recheck.toml"
    toml.write_text('[workloads.monitors]\ntable = "user_block_status"\ncheck = "uptime_app.chekcs:check"\n')
    misspelt = recheck("config", "--json", settings=settings, env={**env, "RECHECK_CONFIG": str(toml)})
    assert misspelt.returncode == 2
    shown = json.loads(misspelt.stdout)
    assert not shown["ready"]
    assert shown["configuration_errors"] == [
        f"workload monitors: {toml} [workloads.monitors] check=uptime_app.chekcs:check: cannot import "
        "'uptime_app.chekcs': ModuleNotFoundError: No module named 'uptime_app.chekcs'"
    ]
    # The worker refuses to start with the same words (exit 2, configuration).
    worker = recheck("worker", settings=settings, env={**env, "RECHECK_CONFIG": str(toml)}, timeout=30)
    assert worker.returncode == 2
    assert f"{toml} [workloads.monitors] check=uptime_app.chekcs:check" in worker.stderr


def test_a_misspelt_table_gets_the_closest_existing_name_first(settings, sql):
    query(sql, "CREATE TABLE monitors (id BIGINT PRIMARY KEY)")
    result = recheck("config", settings=settings, env={"RECHECK_TABLE": "monitor"})
    assert result.returncode == 1
    assert "user_block_status" not in result.stdout.split("problem:", 1)[1]
    assert "monitor does not exist; did you mean 'monitors'? check RECHECK_TABLE" in result.stdout
    init = recheck("init-db", settings=settings, env={"RECHECK_TABLE": "monitor"})
    assert init.returncode == 1 and "did you mean 'monitors'?" in init.stdout


@pytest.fixture(scope="module")
def promtool():
    if not shutil.which(PROMTOOL):
        pytest.fail(f"{PROMTOOL} not found: install Debian's prometheus package (`make test` does)")
    return PROMTOOL


def test_the_alert_rules_are_valid_prometheus_rules(promtool):
    result = subprocess.run(
        [promtool, "check", "rules", str(RULES / "alerts.yml")], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 5 rules found" in result.stdout


def test_the_alert_rules_fire_when_they_should_and_not_before(promtool):
    """Rows overdue fires after two intervals (and its 15 s), not before; no dispatch fires when
    pushes stop and clears when they resume; checks failing fires when most checks fail."""
    result = subprocess.run(
        [promtool, "test", "rules", str(RULES / "alerts_test.yml")], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
