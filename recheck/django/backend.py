"""RecheckBackend: Django's task backend whose enqueue is one INSERT in the caller's transaction.

    TASKS = {"default": {"BACKEND": "recheck.django.RecheckBackend",
                         "QUEUES": ["default", "emails"],
                         "OPTIONS": {"DATABASE": "default", "REDIS_URL": "redis://redis:6379/0",
                                     "MAX_ATTEMPTS": 3}}}

A task enqueued inside `transaction.atomic()` exists if and only if that transaction commits
(no `on_commit`, no broker call to lose). get_result reads the row back through the same
connection. Workers (`manage.py recheck worker`) run the tasks: worker.py.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.core import checks
from django.db import connections
from django.utils import timezone as django_timezone
from django.utils.module_loading import import_string

import recheck.django.table as table
from recheck.django.compat import (
    BaseTaskBackend,
    Task,
    TaskError,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
    normalize_json,
    task_enqueued,
)
from recheck.shared.process.tracing import traceparent


class RecheckBackend(BaseTaskBackend):
    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict) -> None:
        super().__init__(alias, params)
        self.database = self.options.get("DATABASE", "default")

    def enqueue(self, task: Task, args: Any, kwargs: Any) -> TaskResult:
        self.validate_task(task)
        args, kwargs = normalize_json(args), normalize_json(kwargs)
        arguments = json.dumps({"args": args, "kwargs": kwargs}, separators=(",", ":"))
        enqueued = datetime.now(UTC)
        values = [task.module_path, arguments, task.priority, table.urgent(task.priority), task.queue_name,
                  self.alias, enqueued.replace(tzinfo=None), traceparent()]  # fmt: skip
        run_after = table.utc_naive(self._zoned(task.run_after))
        with connections[self.database].cursor() as cursor:
            if run_after is None:
                cursor.execute(table.INSERT, values)
            else:
                cursor.execute(table.INSERT_DEFERRED, [*values, run_after, run_after])
            task_id = cursor.lastrowid
        result = TaskResult(
            task=task, id=str(task_id), status=TaskResultStatus.READY, enqueued_at=self._local(enqueued),
            started_at=None, finished_at=None, last_attempted_at=None, args=args, kwargs=kwargs,
            backend=self.alias, errors=[], worker_ids=[],
        )  # fmt: skip
        task_enqueued.send(type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> TaskResult:
        try:
            key = int(result_id)
        except (TypeError, ValueError):
            raise TaskResultDoesNotExist(result_id) from None
        with connections[self.database].cursor() as cursor:
            cursor.execute(table.SELECT_ONE, [key])
            row = cursor.fetchone()
        if row is None:
            raise TaskResultDoesNotExist(result_id)
        return self.result_of(str(key), row)

    def result_of(self, result_id: str, row: tuple) -> TaskResult:
        (task_path, arguments, priority, queue_name, backend_name, enqueued_at, run_after, result, checked_at,
         due, fail_count, last_error) = row  # fmt: skip
        declared: Task = import_string(task_path)  # the @task object: its function, takes_context
        task = declared.using(priority=priority, queue_name=queue_name, backend=backend_name,
                              run_after=self._local(table.aware(run_after)))  # fmt: skip
        told = table.outcome(result, checked_at, due, fail_count, last_error)
        stored = json.loads(arguments)
        errors = (
            [TaskError(exception_class_path=told.error[0], traceback=told.error[1])] if told.error else []
        )
        answer = TaskResult(
            task=task, id=result_id, status=TaskResultStatus(told.status),
            enqueued_at=self._local(table.aware(enqueued_at)), started_at=self._local(told.started_at),
            finished_at=self._local(told.finished_at), last_attempted_at=self._local(told.last_attempted_at),
            args=stored["args"], kwargs=stored["kwargs"], backend=backend_name, errors=errors,
            worker_ids=told.worker_ids,
        )  # fmt: skip
        object.__setattr__(answer, "_return_value", told.return_value)
        return answer

    def check(self, **kwargs: Any) -> list:
        from django.apps import apps

        problems = list(super().check(**kwargs))
        if not apps.is_installed("recheck.django"):
            problems.append(checks.Error(
                "recheck.django.RecheckBackend needs its app for the tasks table",
                hint="add 'recheck.django' to INSTALLED_APPS, then run manage.py migrate",
                id="recheck.E001",
            ))  # fmt: skip
        return problems

    @staticmethod
    def _zoned(moment: datetime | None) -> datetime | None:
        """run_after as an aware time (a naive one, with USE_TZ off, is in TIME_ZONE)."""
        if moment is None or django_timezone.is_aware(moment):
            return moment
        return django_timezone.make_aware(moment, django_timezone.get_default_timezone())

    @staticmethod
    def _local(moment: datetime | None) -> datetime | None:
        """A time as this project's datetimes are: aware with USE_TZ, naive local time without."""
        if moment is None or settings.USE_TZ:
            return moment
        return django_timezone.make_naive(moment, django_timezone.get_default_timezone())
