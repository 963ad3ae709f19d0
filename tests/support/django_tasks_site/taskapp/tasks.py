"""The project's tasks: each records every run in task_runs (label, time), so the test counts runs."""

import time
from importlib.util import find_spec

from asgiref.sync import sync_to_async
from django.db import connection

if find_spec("django.tasks"):
    from django.tasks import task
else:
    from django_tasks import task


def record(label: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO task_runs (label) VALUES (%s)", [label])
        cursor.execute("SELECT COUNT(*) FROM task_runs WHERE label = %s", [label])
        return cursor.fetchone()[0]


@task
def add(label: str, a: int, b: int) -> dict:
    record(label)
    return {"sum": a + b, "label": label}


@task(priority=50)
def urgent(label: str) -> None:
    record(label)


@task(queue_name="emails")
def send(label: str) -> str:
    record(label)
    return "sent"


@task
def boom(label: str) -> None:
    record(label)
    raise ValueError(f"boom {label}")


@task
def slow_once(label: str, seconds: float) -> int:
    """The first run waits (a worker killed meanwhile), the next ones return at once."""
    runs = record(label)
    if runs == 1:
        time.sleep(seconds)
    return runs


@task
async def async_add(label: str, a: int, b: int) -> int:
    await sync_to_async(record)(label)
    return a + b


@task(takes_context=True)
def attempt(context, label: str) -> int:
    record(label)
    return context.attempt


@task
def big(label: str, size: int) -> str:
    record(label)
    return "x" * size


@task
def noop() -> None:
    """Nothing: what a benchmark of the engine runs."""
