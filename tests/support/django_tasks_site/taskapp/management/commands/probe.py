"""`manage.py probe enqueue SPEC_JSON` / `probe results IDS_JSON` / `probe runs`: what the test
asks of the project, answered as JSON on stdout."""

import json
from datetime import timedelta

from django.core.management.base import BaseCommand
from django.db import connection, transaction
from django.utils import timezone

from taskapp import tasks


class Rollback(Exception):
    pass


class Command(BaseCommand):
    def add_arguments(self, parser):
        parser.add_argument("action")
        parser.add_argument("data", nargs="?", default="null")

    def handle(self, action, data, **options):
        self.stdout.write(json.dumps(getattr(self, action)(json.loads(data)), default=str))

    def enqueue(self, specs):
        """[[task, args, {priority, queue, after_s, rollback}]...] -> ids (null: rolled back)."""
        ids = []
        for name, args, how in specs:
            chosen = getattr(tasks, name)
            changes = {}
            if "priority" in how:
                changes["priority"] = how["priority"]
            if "after_s" in how:
                changes["run_after"] = timezone.now() + timedelta(seconds=how["after_s"])
            chosen = chosen.using(**changes) if changes else chosen
            if how.get("rollback"):
                try:
                    with transaction.atomic():
                        result = chosen.enqueue(*args)
                        ids.append(result.id)  # it had an id inside the transaction
                        raise Rollback
                except Rollback:
                    pass
                continue
            with transaction.atomic():  # the view's own transaction: the task commits with it
                ids.append(chosen.enqueue(*args).id)
        return ids

    def enqueue_traced(self, args):
        """The `add` task enqueued inside a request's span (an SDK tracer provider of this
        command's own): [its id, the span's trace id and span id, in hex]."""
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider

        trace.set_tracer_provider(TracerProvider())
        tracer = trace.get_tracer("taskapp")
        with tracer.start_as_current_span("POST /orders") as span, transaction.atomic():
            task_id = tasks.add.enqueue(args[0], 1, 2).id
        context = span.get_span_context()
        return [task_id, f"{context.trace_id:032x}", f"{context.span_id:016x}"]

    def produce(self, how):
        """{"backend", "seconds", "rate"}: no-op tasks on that TASKS alias, one per transaction, for
        `seconds` (at `rate` tasks/s, or as fast as it can with 0): how many."""
        import time

        chosen = tasks.noop.using(backend=how["backend"])
        began, cpu = time.time(), time.process_time()
        count, started = 0, time.perf_counter()
        deadline = started + how["seconds"]
        while (now := time.perf_counter()) < deadline:
            if how["rate"] and count > (now - started) * how["rate"]:
                time.sleep(min(0.005, count / how["rate"] - (now - started)))
                continue
            with transaction.atomic():
                chosen.enqueue()
            count += 1
        return {"tasks": count, "began": began, "ended": time.time(), "cpu": time.process_time() - cpu}

    def results(self, ids):
        answers = {}
        for task_id in ids:
            try:
                result = tasks.add.get_backend().get_result(task_id)
            except Exception as error:
                answers[task_id] = {"missing": type(error).__name__}
                continue
            answers[task_id] = {
                "status": str(result.status),
                "value": result.return_value if result.status == "SUCCESSFUL" else None,
                "errors": [[e.exception_class_path, e.traceback] for e in result.errors],
                "error_class": result.errors[0].exception_class.__name__ if result.errors else None,
                "attempts": result.attempts,
                "enqueued_at": result.enqueued_at,
                "started_at": result.started_at,
                "finished_at": result.finished_at,
                "run_after": result.task.run_after,
                "task": result.task.module_path,
                "queue": result.task.queue_name,
                "priority": result.task.priority,
                "args": result.args,
            }
        return answers

    def admin(self, _):
        """The tasks' page of Django's admin as a superuser sees it: its status and text."""
        from django.contrib.auth.models import User
        from django.test import Client

        user = User.objects.filter(username="admin").first() or User.objects.create_superuser(
            "admin", "", "pw"
        )
        client = Client()
        client.force_login(user)
        page = client.get("/admin/recheck_tasks/rechecktask/?q=boom")  # its search box
        return {"status": page.status_code, "text": page.content.decode()}

    def runs(self, _):
        with connection.cursor() as cursor:
            cursor.execute("SELECT n, label, at FROM task_runs ORDER BY n")
            return [[n, label, at.isoformat()] for n, label, at in cursor.fetchall()]
