"""The Django app that owns the tasks table and its migration (INSTALLED_APPS: "recheck.django")."""

from __future__ import annotations

from django.apps import AppConfig


class RecheckTasksConfig(AppConfig):
    name = "recheck.django"
    label = "recheck_tasks"
    verbose_name = "recheck tasks"
    default_auto_field = "django.db.models.BigAutoField"
