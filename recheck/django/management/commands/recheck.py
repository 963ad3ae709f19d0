"""`manage.py recheck COMMAND ...`: recheck's command line on this project's tasks table.

    python manage.py recheck run --workers 2      # a dispatcher and two workers, here
    python manage.py recheck dispatcher           # one process each, as compose runs them
    python manage.py recheck worker
    python manage.py recheck status               # and inspect, retry --all-dead, config, ...

The database, Redis and the table come from settings (TASKS, DATABASES: environment.py); the
processes recheck starts inherit them and DJANGO_SETTINGS_MODULE, and set Django up once each.
"""

from __future__ import annotations

import os
import sys

from django.core.management.base import BaseCommand, CommandError

from recheck.django.environment import recheck_environment


class Command(BaseCommand):
    help = "recheck's command line (run, worker, dispatcher, status, inspect, retry, ...) on the tasks table"

    def add_arguments(self, parser) -> None:
        parser.add_argument("--backend", default="default", help="the TASKS alias (default: default)")
        parser.add_argument("args", nargs="...", help="recheck's own arguments, e.g. run --workers 2")

    def run_from_argv(self, argv: list[str]) -> None:  # recheck parses its own options (--help too)
        backend = "default"
        rest = argv[2:]
        if rest[:1] == ["--backend"] and len(rest) > 1:
            backend, rest = rest[1], rest[2:]
        elif rest and rest[0].startswith("--backend="):
            backend, rest = rest[0].split("=", 1)[1], rest[1:]
        sys.exit(self.recheck(backend, rest))

    def handle(self, *args: str, **options: object) -> None:  # call_command("recheck", "status")
        code = self.recheck(str(options.get("backend") or "default"), list(args))
        if code:
            raise CommandError(f"recheck {' '.join(args)} exited {code}", returncode=code)

    @staticmethod
    def recheck(backend: str, argv: list[str]) -> int:
        import django

        if not django.apps.apps.ready:
            django.setup()
        os.environ.update(recheck_environment(backend, os.environ))
        # The processes `recheck run` starts import the project's tasks: its folder on their path.
        project = os.path.abspath(sys.path[0] or os.getcwd())
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (project, os.environ.get("PYTHONPATH")) if p)
        from recheck.cli import main

        return main(argv or ["--help"])
