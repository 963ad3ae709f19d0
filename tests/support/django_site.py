"""A minimal Django project for tests: Django's own auth app on the test's MariaDB database.

`python -m tests.support.django_site migrate` lets Django's migrations create auth_user;
`python -m tests.support.django_site churn SECONDS` creates, updates (save()) and deletes users
through the ORM for that long and prints what it did as JSON. Django talks to MariaDB through
PyMySQL standing in for mysqlclient. DJANGO_DB_NAME and DJANGO_DB_PORT say where.
"""

from __future__ import annotations

import json
import os
import sys
import time

import pymysql


def setup() -> None:
    pymysql.install_as_MySQLdb()
    import django
    from django.conf import settings

    settings.configure(
        INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth"],
        DATABASES={
            "default": {
                "ENGINE": "django.db.backends.mysql",
                "NAME": os.environ["DJANGO_DB_NAME"],
                "USER": "root",
                "HOST": "127.0.0.1",
                "PORT": os.environ["DJANGO_DB_PORT"],
            }
        },
        USE_TZ=True,
        PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"],  # fast: a test
        DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
    )
    django.setup()


def churn(seconds: float) -> dict:
    """Create, update and delete users the way an application does, for `seconds`."""
    from django.contrib.auth.models import User

    done = {"created": 0, "updated": 0, "deleted": 0, "deleted_ids": []}
    deadline = time.monotonic() + seconds
    n = 0
    while time.monotonic() < deadline:
        n += 1
        user = User.objects.create_user(f"user{n}-{time.time_ns()}", f"u{n}@example.com", "pw")
        done["created"] += 1
        if n % 3 == 0:
            user.first_name = f"renamed {n}"
            user.save()  # an ORM save writes every column Django knows, none of recheck's
            done["updated"] += 1
        if n % 5 == 0:
            victim = User.objects.order_by("?").first()
            done["deleted_ids"].append(victim.id)
            victim.delete()
            done["deleted"] += 1
        time.sleep(0.05)
    done["remaining"] = User.objects.count()
    return done


def main(argv: list[str]) -> int:
    setup()
    if argv[0] == "migrate":
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        return 0
    if argv[0] == "churn":
        print(json.dumps(churn(float(argv[1]))))
        return 0
    raise SystemExit(f"unknown command {argv[0]!r}")


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
