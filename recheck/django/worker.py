"""The check recheck's workers run for the tasks table (RECHECK_CHECK=recheck.django.worker:run):
one task per row, RECHECK_CONCURRENCY at a time per worker process; async tasks on the worker's
event loop, plain ones in a thread pool of that size, each thread with its own database
connection, closed when stale as after a request (close_old_connections).

A task that returns is done: its JSON return value, start time and worker are the row's result
(table.success_text). One that raises fails its attempt with "module.Class: message" and the
traceback (table.error_text): retried up to MAX_ATTEMPTS, then dead. The outcome is written by
recheck's batched, fenced write-back, not here. Importing this module sets Django up (once per
worker process) from DJANGO_SETTINGS_MODULE.
"""

from __future__ import annotations

import asyncio
import os
import socket
import traceback
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from inspect import iscoroutinefunction
from typing import Any

import django
from django.apps import apps
from django.core.exceptions import ImproperlyConfigured

if not apps.ready:
    if not os.environ.get("DJANGO_SETTINGS_MODULE"):
        raise ImproperlyConfigured(
            "recheck.django.worker runs Django tasks: set DJANGO_SETTINGS_MODULE (manage.py recheck sets it)"
        )
    django.setup()

import json

from django.db import close_old_connections
from django.utils.module_loading import import_string

import recheck.django.table as table
from recheck.django.compat import (
    Task,
    TaskContext,
    TaskResult,
    TaskResultStatus,
    normalize_json,
    task_backends,
    task_finished,
    task_started,
)
from recheck.workers.checks import StoredError

WORKER_ID = f"{socket.gethostname()}:{os.getpid()}"
_threads: ThreadPoolExecutor | None = None
_senders: dict[str, type] = {}


def threads() -> ThreadPoolExecutor:
    global _threads
    if _threads is None:  # as many threads as tasks run at once (RECHECK_CONCURRENCY)
        size = int(os.environ.get("RECHECK_CONCURRENCY", "50") or 50)
        _threads = ThreadPoolExecutor(max(size, 1), thread_name_prefix="django-task")
    return _threads


async def run(row: Mapping[str, Any]) -> str:
    """Run one task row; its result text, or StoredError with its traceback."""
    task: Task = import_string(row["task_path"])
    stored = json.loads(row["args_kwargs"])
    attempt = int(row["fail_count"]) + 1
    started = datetime.now(UTC)
    running = TaskResult(
        task=task, id=str(row["id"]), status=TaskResultStatus.RUNNING,
        enqueued_at=table.aware(row["enqueued_at"]), started_at=started, finished_at=None,
        last_attempted_at=started, args=stored["args"], kwargs=stored["kwargs"], backend=row["backend_name"],
        errors=[], worker_ids=["unknown"] * (attempt - 1) + [WORKER_ID],
    )  # fmt: skip
    task_started.send(_backend_class(running.backend), task_result=running)
    args = [TaskContext(task_result=running), *running.args] if task.takes_context else running.args
    try:
        if iscoroutinefunction(task.func):
            value = await task.func(*args, **running.kwargs)
        else:
            loop = asyncio.get_running_loop()
            value = await loop.run_in_executor(threads(), _call, task, args, running.kwargs)
        text = table.success_text(normalize_json(value), started, WORKER_ID, attempt)
    except asyncio.CancelledError:  # recheck's own timeout (RECHECK_CHECK_TIMEOUT) or a stop
        raise
    except BaseException as error:  # any exception fails this task alone (SystemExit included)
        _finished(task, running, TaskResultStatus.FAILED)
        kind = type(error)
        raise StoredError(
            table.error_text(f"{kind.__module__}.{kind.__qualname__}", str(error), _traceback(error))
        ) from None
    _finished(task, running, TaskResultStatus.SUCCESSFUL)
    return text


def _backend_class(alias: str) -> type:
    """The signals' sender: the backend's class, looked up once per alias (task_backends[alias]
    makes a backend per asyncio task, about 90 us each: most of a no-op task's cost)."""
    sender = _senders.get(alias)
    if sender is None:
        sender = _senders[alias] = type(task_backends[alias])
    return sender


def _traceback(error: BaseException) -> str:
    """The traceback from the task's own frames on (not this module's nor the thread pool's)."""
    frames = error.__traceback__
    while (
        frames is not None
        and frames.tb_next is not None
        and ((name := frames.tb_frame.f_code.co_filename) == __file__ or "concurrent/futures" in name)
    ):
        frames = frames.tb_next
    return "".join(traceback.format_exception(type(error), error, frames))


def _call(task: Task, args: list, kwargs: dict) -> Any:
    close_old_connections()  # as a request does: a connection past CONN_MAX_AGE or broken is not reused
    try:
        return task.func(*args, **kwargs)
    finally:
        close_old_connections()


def _finished(task: Task, result: TaskResult, status: TaskResultStatus) -> None:
    object.__setattr__(result, "status", status)
    object.__setattr__(result, "finished_at", datetime.now(UTC))
    task_finished.send(_backend_class(result.backend), task_result=result)
