"""Django's tasks run by recheck: a `django.tasks` backend (Django 6.0+; on Django 5.2 the
django-tasks backport) whose enqueue is one INSERT through Django's own connection, so a task
exists if and only if the transaction that enqueued it commits.

    INSTALLED_APPS = [..., "recheck.django"]
    TASKS = {"default": {"BACKEND": "recheck.django.RecheckBackend"}}

`manage.py migrate` creates the tasks table (recheck_task), `manage.py recheck run --workers 2`
runs a dispatcher and workers for it. docs/django-tasks.md tells the rest.
"""

from __future__ import annotations

from typing import Any

__all__ = ["RecheckBackend"]


def __getattr__(name: str) -> Any:  # the backend imports Django's tasks: only when asked for
    if name == "RecheckBackend":
        from recheck.django.backend import RecheckBackend

        return RecheckBackend
    raise AttributeError(name)
