"""The tasks in Django's admin: read-only (recheck's commands and dashboard act on them)."""

from __future__ import annotations

from django.contrib import admin

from recheck.django.models import RecheckTask


@admin.register(RecheckTask)
class RecheckTaskAdmin(admin.ModelAdmin):
    list_display = ("id", "task_path", "queue_name", "priority", "state", "enqueued_at", "checked_at",
                    "fail_count", "error")  # fmt: skip
    list_filter = ("queue_name", "task_path")
    search_fields = ("task_path", "last_error")

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    @admin.display(description="last error")
    def error(self, task: RecheckTask) -> str:
        return (task.last_error or "").split("\n", 1)[0][:120]
