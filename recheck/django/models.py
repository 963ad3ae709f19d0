"""The tasks table as Django sees it: read-only (the admin, your own queries). Its schema is
table.CREATE_TABLE and table.ADD_TRACEPARENT, made by this app's migrations; the backend writes
it with its own INSERT and recheck's workers with their write-backs, never through this model."""

from __future__ import annotations

from django.db import models

import recheck.django.table as table
from recheck.shared.core.rowstates import RowState, state_of


class RecheckTask(models.Model):
    id = models.BigAutoField(primary_key=True)
    task_path = models.CharField(max_length=255)
    args_kwargs = models.TextField()
    priority = models.SmallIntegerField(default=0)
    urgent = models.SmallIntegerField(default=0)
    queue_name = models.CharField(max_length=32)
    backend_name = models.CharField(max_length=32)
    enqueued_at = models.DateTimeField()
    run_after = models.DateTimeField(null=True)
    result = models.TextField(null=True)
    checked_at = models.DateTimeField(null=True)
    next_check_at = models.DateTimeField(null=True)
    check_count = models.PositiveIntegerField(default=0)
    fail_count = models.PositiveIntegerField(default=0)
    last_error = models.TextField(null=True)
    traceparent = models.CharField(max_length=55, null=True)  # the enqueuing request's trace context

    class Meta:
        managed = False  # the migration's own SQL makes it (DATETIME(3), an expression default)
        db_table = table.TABLE
        verbose_name = "task"
        ordering = ("-id",)

    def __str__(self) -> str:
        return f"{self.task_path} #{self.pk}"

    @property
    def state(self) -> str:
        """recheck's word for the row: due, done, dead, paused, quarantined."""
        due = self.next_check_at
        if due is not None and due.tzinfo is not None:
            due = due.replace(tzinfo=None)
        state = state_of(due)
        return "running or due" if state is RowState.DUE else state.value
