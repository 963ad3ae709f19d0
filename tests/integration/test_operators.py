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

from tests.support import checks
from tests.support.helpers import REPO, dispatch_all, make_dispatcher, query, recheck, seed_rows

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
    held = worker.intake.take(2)  # ids 1 and 2 taken, not yet written
    in_flight = story(settings, "1")
    assert in_flight["state"] == "in_flight" and f"with worker {worker.id} (alive)" in in_flight["where"]

    def fails_on_five(ids):
        return [ValueError("upstream said 503 for user 5") if i == 5 else "ok" for i in ids]

    failing_worker = make_worker(settings, fails_on_five)
    failing_worker.batch.process(failing_worker.intake.take(8))
    failing = story(settings, "5")
    assert (failing["fail_count"], failing["check_count"]) == (1, 0)
    assert failing["last_error"] == "ValueError: upstream said 503 for user 5"
    assert failing["state"] in ("waiting", "due", "overdue")  # its retry backoff is 0.2 s here

    quarantined = story(settings, "11")
    assert quarantined["state"] == "quarantined" and quarantined["release"] == "recheck release 11"
    waiting = story(settings, "12")
    assert waiting["state"] == "waiting" and waiting["late_s"] < -3500
    worker.batch.process(held)
    missing = inspect(settings, "999")
    assert missing.returncode == 1 and "no row with id '999'" in missing.stderr
    assert inspect(settings, "abc").returncode == 2  # not an integer id


def test_failures_are_grouped_by_error_without_scanning_the_table(settings, make_worker, sql):
    seed_rows(settings, 40, due_now=True)
    dispatch_all(settings)
    worker = make_worker(settings, checks.odd_fails)  # odd ids fail: "ValueError: odd id 7", ...
    worker.poll()
    facts = json.loads(recheck("status", "--json", settings=settings).stdout)
    groups = {group["error"]: group for group in facts["errors"]}
    assert list(groups) == ["ValueError: odd id N"], groups
    group = groups["ValueError: odd id N"]
    assert group["count"] == 20 and len(group["examples"]) == 5
    assert all(int(example) % 2 for example in group["examples"])
    assert group["first_seen"] <= group["last_seen"]
    text = recheck("status", settings=settings).stdout
    assert "failures in the last hour, by error:" in text and "20x  ValueError: odd id N" in text


def test_config_shows_each_value_and_where_it_came_from_with_secrets_hidden(settings, tmp_path, mariadb):
    (tmp_path / ".env").write_text("RECHECK_WORKER_BATCH=321\n")
    (tmp_path / "recheck.toml").write_text('[workloads.users]\ntable = "user_block_status"\ninterval = 7\n')
    secret_url = settings.mysql_url.replace("root@", "root:@")
    env = {
        "RECHECK_CONFIG": str(tmp_path / "recheck.toml"),
        "RECHECK_REDIS_URL": settings.redis_url + "?password=",
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
    assert "SUCCESS: 3 rules found" in result.stdout


def test_the_alert_rules_fire_when_they_should_and_not_before(promtool):
    """Rows overdue fires after two intervals (and its 15 s), not before; no dispatch fires when
    pushes stop and clears when they resume; checks failing fires when most checks fail."""
    result = subprocess.run(
        [promtool, "test", "rules", str(RULES / "alerts_test.yml")], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
