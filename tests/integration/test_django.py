"""recheck on a real application's table: Django's auth_user, made by Django's own migrations.

docs/existing-table.md ("Pointing recheck at an existing table") followed step by step: `recheck init-db`
prints the ALTER TABLE, `--apply` applies it (and spreads the existing users' due times); then
recheck keeps every user fresh while Django creates, updates and deletes users through its ORM.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support.helpers import REPO, docs_text, fresh_status, install_audit, query, recheck, scalar
from tests.support.servers import wait_for

pytestmark = pytest.mark.django


def documented_django_env() -> dict[str, str]:
    """What docs/existing-table.md tells a Django user to set: the variables between its
    `# Django` and `# Rails` comments (recheck's own column names, no collision)."""
    block = docs_text("existing-table.md").split("\n# Django", 1)[1].split("\n# Rails", 1)[0]
    return dict(word.split("=", 1) for word in block.split() if word.startswith("RECHECK_"))


DJANGO_ENV = documented_django_env()


def django(settings, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    where = {"DJANGO_DB_NAME": settings.mysql.database, "DJANGO_DB_PORT": str(settings.mysql.port)}
    env = {**os.environ, **where, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "tests.support.django_site", *args]
    return subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True, timeout=timeout)


def test_django_keeps_working_and_recheck_keeps_every_user_fresh(make_settings, sql, procs):
    settings = make_settings(interval=2.0)
    migrated = django(settings, "migrate")
    assert migrated.returncode == 0, migrated.stderr
    before = django(settings, "churn", "1")  # users made before recheck arrives
    assert before.returncode == 0, before.stderr

    dry = recheck("init-db", settings=settings, env=DJANGO_ENV)
    assert dry.returncode == 1 and "ALTER TABLE `auth_user`" in dry.stdout, dry.stdout + dry.stderr
    applied = recheck("init-db", "--apply", settings=settings, env=DJANGO_ENV)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert "spread the due times of" in applied.stdout

    recheck_settings = settings.evolve(
        **{k.removeprefix("RECHECK_").lower(): v for k, v in DJANGO_ENV.items()}
    )
    install_audit(sql, recheck_settings)
    procs.start("dispatcher", settings, env=DJANGO_ENV)
    procs.start("worker", settings, env=DJANGO_ENV)
    checked_once = "SELECT COUNT(*) FROM auth_user WHERE recheck_count > 0"
    wait_for(lambda: scalar(sql, checked_once) > 0, 20, "recheck's first checks")
    started = scalar(sql, "SELECT NOW(3)")
    churn = django(settings, "churn", "10")  # Django creates, saves and deletes users meanwhile
    assert churn.returncode == 0, churn.stderr  # the ORM never noticed recheck's columns
    done = json.loads(churn.stdout)
    assert done["created"] > 50 and done["updated"] > 10 and done["deleted"] > 5
    # Every user, old and new, checked within two intervals of Django's last change.
    never = "SELECT COUNT(*) FROM auth_user WHERE recheck_count = 0"
    wait_for(lambda: scalar(sql, never) == 0, 2 * settings.interval + 1, "every user checked")
    users = scalar(sql, "SELECT COUNT(*) FROM auth_user")
    assert users == done["remaining"]
    late = scalar(
        sql,
        "SELECT COALESCE(MAX(TIMESTAMPDIFF(MICROSECOND, old_due, written_at)), 0) / 1e6 FROM audit "
        "WHERE new_count = old_count + 1 AND old_due >= %s",
        (started,),
    )
    assert float(late) < 1.0, late  # no user was checked late while Django worked
    # The audit above is the claim; status must agree, polled as one instant's verdict may catch
    # a row a moment past its second on a busy runner (fresh_status).
    (status,) = fresh_status(settings, DJANGO_ENV)["workloads"].values()
    assert status["fresh"] and status["overdue_1s"] == 0, status
    # A Django save() leaves recheck's columns alone: the renamed users kept their counts.
    renamed = query(sql, "SELECT MIN(recheck_count) FROM auth_user WHERE first_name LIKE 'renamed %%'")
    assert renamed[0][0] >= 1
