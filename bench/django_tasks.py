"""`python -m bench.django_tasks`: Django's tasks on recheck against django-tasks' database
backend (django-tasks-db), side by side on the same private MariaDB (bench/compare.py's tuned
one) and the same no-op task, each with its own worker processes.

The project is tests/support/django_tasks_site with both backends in its TASKS ("default":
recheck.django.RecheckBackend, "db": django_tasks_db.DatabaseBackend). For each backend and run:
its workers start (recheck: `manage.py recheck run --workers W`, a dispatcher and W workers of
concurrency 50; django-tasks-db: P `manage.py db_worker --interval 0.05` processes, one task at a
time each, `SELECT ... FOR UPDATE SKIP LOCKED`), then --producers processes enqueue one task per
transaction through Django for --seconds:

- `saturated`: the producers as fast as they can. tasks/s = tasks finished within the
  producers' window / its length; and how many the producers enqueued.
- `steady`: the producers paced to --rate tasks/s in all. Enqueue -> start p50/p99 (the task's
  `enqueued_at` to its `started_at`, both from Python's clock on this machine), over every task
  enqueued in the window; tasks not started 30 s after it count as never started.

Both modes: CPU time per task enqueued in the window, in microseconds, of the backend's worker
processes (for recheck its dispatcher too), of the producers, and of MariaDB and Redis, from
the producers' start until the last of them ends (psutil). On 2 cores the roles share the CPU:
what one takes, the others cannot have.

Backends alternate within a run (recheck, then django-tasks-db), --runs times; --backends picks
one. Django talks to MariaDB through mysqlclient, Django's own MySQL driver, when it is installed
(`pip install mysqlclient`, which builds against libmariadb-dev and pkg-config), else through
PyMySQL standing in for it; the first line says which. The producers' CPU depends on it.

    .venv/bin/pip install -e '.[bench]'   # django-tasks-db
    .venv/bin/python -m bench.django_tasks --runs 3
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import psutil
import pymysql

from bench.compare import private_mariadb
from tests.support.servers import RedisServer

REPO = Path(__file__).resolve().parent.parent
SITE = REPO / "tests" / "support" / "django_tasks_site"
SETTINGS = """
from tasksite.settings import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "django_tasks_db"]  # noqa: F405
PEER = {"BACKEND": "django_tasks_db.DatabaseBackend", "QUEUES": ["default", "emails"]}
TASKS = {**TASKS, "db": PEER}  # noqa: F405
TASKS["default"]["OPTIONS"]["RECHECK"]["CONCURRENCY"] = 50  # the docs' setting, not the tests' 4
"""
# Per backend: (how many finished in [a, b]), (enqueued_at, started_at) of every task, the reset.
QUERIES = {
    "default": {
        "finished": "SELECT COUNT(*) FROM recheck_task "
        "WHERE next_check_at IS NULL AND checked_at BETWEEN %s AND %s",
        "times": "SELECT enqueued_at, JSON_VALUE(result, '$.started_at') FROM recheck_task",
        "unstarted": "SELECT COUNT(*) FROM recheck_task WHERE next_check_at IS NOT NULL",
        "reset": ["TRUNCATE recheck_task"],
    },
    "db": {
        "finished": "SELECT COUNT(*) FROM django_tasks_database_dbtaskresult "
        "WHERE status = 'SUCCESSFUL' AND finished_at BETWEEN %s AND %s",
        "times": "SELECT enqueued_at, started_at FROM django_tasks_database_dbtaskresult",
        "unstarted": "SELECT COUNT(*) FROM django_tasks_database_dbtaskresult WHERE started_at IS NULL",
        "reset": ["TRUNCATE django_tasks_database_dbtaskresult"],
    },
}
NAMES = {"default": "recheck", "db": "django-tasks-db"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.django_tasks", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--producers", type=int, default=8)
    parser.add_argument("--rate", type=float, default=1000.0, help="steady: tasks/s in all")
    parser.add_argument("--recheck-workers", type=int, default=2)
    parser.add_argument("--db-workers", type=int, default=4)
    parser.add_argument("--modes", default="saturated,steady")
    parser.add_argument("--backends", default="recheck,django-tasks-db",
                        help="which to measure, comma-separated")  # fmt: skip
    parser.add_argument("--json", type=Path, help="write every measurement here too")
    args = parser.parse_args(argv)
    aliases = {name: alias for alias, name in NAMES.items()}
    wanted = [name.strip() for name in args.backends.split(",") if name.strip()]
    unknown = [name for name in wanted if name not in aliases]
    if unknown or not wanted:
        parser.error(f"--backends: choose from {', '.join(aliases)} (got {args.backends!r})")
    chosen = [aliases[name] for name in wanted]
    started: list = []
    folder = Path(tempfile.mkdtemp(prefix="bench-django-"))
    results = []
    try:
        mysql = private_mariadb(folder, started, print)
        redis = RedisServer(folder / "redis")
        started.append(redis)
        redis.start()
        site = folder / "site"
        shutil.copytree(SITE, site, ignore=shutil.ignore_patterns("__pycache__"))
        (site / "benchsite.py").write_text(SETTINGS)
        conn = pymysql.connect(host="127.0.0.1", port=mysql.port, user="root", autocommit=True)
        conn.cursor().execute("CREATE DATABASE bench")
        conn.select_db("bench")
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "benchsite", "DJANGO_DB_NAME": "bench",
               "DJANGO_DB_PORT": str(mysql.port), "REDIS_URL": redis.url(),
               "PYTHONPATH": str(site)}  # fmt: skip
        env.pop("RECHECK_CONFIG", None)
        manage = [sys.executable, "manage.py"]
        subprocess.run([*manage, "migrate", "-v0"], cwd=site, env=env, check=True)
        driver = "mysqlclient" if importlib.util.find_spec("MySQLdb") else "PyMySQL (no mysqlclient)"
        print(f"Django's MySQL driver: {driver}", flush=True)
        for run in range(1, args.runs + 1):
            for mode in args.modes.split(","):
                for backend in chosen:
                    for statement in QUERIES[backend]["reset"]:
                        conn.cursor().execute(statement)
                    redis.client().flushall()
                    servers = [psutil.Process(server.process.pid) for server in (mysql, redis)]
                    result = measure(args, mode, backend, site, env, conn, servers)
                    result.update(run=run, mode=mode, backend=NAMES[backend])
                    results.append(result)
                    print(json.dumps(result), flush=True)
    finally:
        for server in reversed(started):
            server.stop()
        shutil.rmtree(folder, ignore_errors=True)
    report(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


def measure(args, mode: str, backend: str, site: Path, env: dict, conn, servers: list) -> dict:
    manage = [sys.executable, "manage.py"]
    if backend == "default":
        workers = [subprocess.Popen([*manage, "recheck", "run", "--workers", str(args.recheck_workers)],
                                    cwd=site, env=env, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)]  # fmt: skip
    else:
        workers = [subprocess.Popen([*manage, "db_worker", "--backend", "db", "--interval", "0.05",
                                     "--no-startup-delay"], cwd=site, env=env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                   for _ in range(args.db_workers)]  # fmt: skip
    try:
        time.sleep(4)  # the workers up and idle
        rate = args.rate / args.producers if mode == "steady" else 0
        how = json.dumps({"backend": backend, "seconds": args.seconds, "rate": rate})
        working = [psutil.Process(w.pid) for w in workers]
        working += [child for parent in working for child in parent.children(recursive=True)]
        before = {"workers": cpu_of(working), "servers": cpu_of(servers)}
        producers = [subprocess.Popen([*manage, "probe", "produce", how], cwd=site, env=env,
                                      stdout=subprocess.PIPE, text=True)
                     for _ in range(args.producers)]  # fmt: skip
        made = [json.loads(p.communicate()[0]) for p in producers]
        spent = {"workers": cpu_of(working) - before["workers"],
                 "servers": cpu_of(servers) - before["servers"],
                 "producers": sum(m["cpu"] for m in made)}  # fmt: skip
        begin = datetime.fromtimestamp(min(m["began"] for m in made), UTC).replace(tzinfo=None)
        end = datetime.fromtimestamp(max(m["ended"] for m in made), UTC).replace(tzinfo=None)
        enqueued = sum(m["tasks"] for m in made)
        with conn.cursor() as cursor:
            cursor.execute(QUERIES[backend]["finished"], (begin, end))
            finished = cursor.fetchone()[0]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and unstarted(conn, backend):
            time.sleep(0.5)
        with conn.cursor() as cursor:
            cursor.execute(QUERIES[backend]["times"])
            pairs = cursor.fetchall()
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            try:
                worker.wait(30)
            except subprocess.TimeoutExpired:
                worker.kill()
    waits = sorted(
        (to_naive(started) - enqueued_at).total_seconds()
        for enqueued_at, started in pairs
        if started is not None
    )
    window = (end - begin).total_seconds()
    return {
        "enqueued": enqueued,
        "enqueued_per_s": round(enqueued / window),
        "finished_per_s": round(finished / window),
        "never_started": len(pairs) - len(waits),
        "start_p50_ms": round(1000 * percentile(waits, 0.50), 1) if waits else None,
        "start_p99_ms": round(1000 * percentile(waits, 0.99), 1) if waits else None,
        **{f"cpu_us_per_task_{role}": round(1e6 * used / max(enqueued, 1)) for role, used in spent.items()},
    }


def cpu_of(processes: list) -> float:
    """CPU seconds (user + system) the processes have used so far; those gone count nothing."""
    total = 0.0
    for process in processes:
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def unstarted(conn, backend: str) -> int:
    with conn.cursor() as cursor:
        cursor.execute(QUERIES[backend]["unstarted"])
        return cursor.fetchone()[0]


def to_naive(value: str | datetime) -> datetime:
    """A start time as UTC without a zone: recheck's is ISO text with +00:00, the peer's a column."""
    moment = datetime.fromisoformat(value) if isinstance(value, str) else value
    return moment if moment.tzinfo is None else moment.astimezone(UTC).replace(tzinfo=None)


def percentile(values: list[float], share: float) -> float:
    return values[min(len(values) - 1, int(share * len(values)))]


def report(results: list[dict]) -> None:
    print("\nmode       backend          tasks/s finished (range)   enqueued/s   "
          "start p50 / p99 ms (ranges)   never started")  # fmt: skip
    for mode in dict.fromkeys(r["mode"] for r in results):
        for backend in NAMES.values():
            mine = [r for r in results if r["mode"] == mode and r["backend"] == backend]
            if not mine:
                continue

            def span(key: str, mine: list[dict] = mine) -> str:
                return f"{min(r[key] or 0 for r in mine)}-{max(r[key] or 0 for r in mine)}"

            print(f"{mode:10} {backend:16} {span('finished_per_s'):>22} {span('enqueued_per_s'):>12}   "
                  f"{span('start_p50_ms')} / {span('start_p99_ms')}   {span('never_started')}   "
                  f"CPU us per task: workers {span('cpu_us_per_task_workers')}, "
                  f"producers {span('cpu_us_per_task_producers')}, "
                  f"MariaDB + Redis {span('cpu_us_per_task_servers')}")  # fmt: skip
        per = {}
        for backend in NAMES.values():
            rates = [r["finished_per_s"] for r in results if r["mode"] == mode and r["backend"] == backend]
            if rates:
                per[backend] = statistics.median(rates)
        if len(per) == 2 and per["django-tasks-db"]:
            print(f"{mode}: recheck / django-tasks-db tasks finished per second, medians: "
                  f"{per['recheck'] / per['django-tasks-db']:.1f}x")  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
