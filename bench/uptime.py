"""`python -m bench.uptime`: an uptime monitor run by the real `recheck run`, measured (issue 23).

The application's table (`monitors`: a CHAR(36) UUID key, a URL, the application's own `status`
column, each monitor's `interval_s` of 2, 5 or 15 s) in a database of its own, `uptime_bench`
(dropped at the start), prepared by `recheck init-db --apply` with recheck's result in a column
of its own (`probe_result`). The targets are served by this process, by kind: up (200), flaky
(500 during a failure window, 200 before and after), slow (2-3 s, then 200), hang (30 s; the
client gives up after 5 s) and refused (a port nothing listens on). The check is `probe` below:
async, per row (`columns = ["url"]`), one shared httpx client, "up" for a 2xx, an exception for
a 5xx or a connection error, so failures are what is measured.

While `recheck run --workers W --duration N` runs, `recheck status --json` is asked once a second
(and the text verdict a few times). Afterwards, from the record the check keeps (one line per
probe: row, start, end, outcome) and from the table:

- each flaky monitor's recovery: from the end of the failure window to its first successful
  probe, against its interval plus the check's own time (the failed probe's and the successful
  one's);
- its probes during the window, against window / interval: failures keep the row's rhythm;
- every monitor's rhythm: from one probe's end to the next one's start, minus its interval;
- the status samples taken while rows past due were being checked (slow and hanging targets in
  flight), and how many of them said fresh.

A source-checkout tool, not part of the test suite. It uses MariaDB on 127.0.0.1:3306 (root)
and Redis db 0 under the key prefix `uptime` (its keys are deleted before and after).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import itertools
import json
import os
import random
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pymysql
import redis

REPO = Path(__file__).resolve().parent.parent
DATABASE = "uptime_bench"
KEY_PREFIX = "uptime"
WORKLOAD = "monitors"
# Of every 20 monitors: 14 up, 2 flaky, 2 slow, 1 hang, 1 refused; each kind at every interval.
KINDS = ("up",) * 14 + ("flaky",) * 2 + ("slow",) * 2 + ("hang", "refused")
INTERVALS = (2, 5, 15)
SLOW_S = (2.0, 3.0)
HANG_S = 30.0
CLIENT_TIMEOUT = 5.0  # httpx's: a hanging target fails after 5 s, inside the check's 10 s
CHECK_TIMEOUT = 10.0
WARM_UP = 10.0  # seconds of the run left out of the rhythm and status figures
PROBES_ENV = "UPTIME_PROBES_DIR"  # where each worker process appends its probes
CONNECTIONS_ENV = "UPTIME_CONNECTIONS"

WORKLOAD_TOML = """\
[workloads.{name}]
mysql_url = "{mysql_url}"
table = "monitors"
id_column = "id"
result_column = "probe_result"
interval = {longest}
interval_column = "interval_s"
check = "bench.uptime:probe"
columns = ["url"]
concurrency = {concurrency}
check_timeout = {check_timeout:g}
failing_threshold = {failing_threshold:g}
"""


# -- the check (imported by the workers as bench.uptime:probe) --


class TargetDown(Exception):
    """The target answered with a server error."""


@functools.cache
def client() -> httpx.AsyncClient:
    """One client per worker process. httpx's default pool of 100 connections would make probes
    wait behind hanging targets (and the wait counts in the 5 s timeout): as many as the
    workload's concurrency. No keep-alive, as for targets on many hosts: measured here, httpx
    spends 1.4 ms of CPU per request without it, and 3.6-5.4 ms with 100-200 pooled connections."""
    connections = int(os.environ.get(CONNECTIONS_ENV, "200"))
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=0)
    return httpx.AsyncClient(timeout=CLIENT_TIMEOUT, limits=limits)


@functools.cache
def probe_log():
    folder = os.environ.get(PROBES_ENV)
    if not folder:
        return None
    return open(Path(folder) / f"probes-{os.getpid()}.tsv", "a", buffering=1)


def record(row_id: str, started: float, ended: float, outcome: str) -> None:
    log = probe_log()
    if log is not None:
        log.write(f"{row_id}\t{started:.3f}\t{ended:.3f}\t{outcome}\n")


async def probe(row) -> str:
    """ "up" for a 2xx, "http NNN" for another answer below 500; raises for a 5xx or when the
    target cannot be reached (a failure: fail_count, last_error, the row keeps its rhythm)."""
    started = time.time()
    outcome = "cancelled"  # the check's timeout, or a stopping worker
    try:
        response = await client().get(row["url"])
        outcome = "up" if response.is_success else f"http {response.status_code}"
        if response.status_code >= 500:
            raise TargetDown(f"HTTP {response.status_code} from {row['url']}")
        return outcome
    except httpx.HTTPError as error:
        outcome = type(error).__name__
        raise
    finally:
        record(row["id"], started, time.time(), outcome)


# -- the targets --


class Targets(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # the default backlog of 5 drops connections in a burst

    def __init__(self, fail_from: float, fail_for: float):
        super().__init__(("127.0.0.1", 0), TargetHandler)
        self.fail_from = fail_from  # seconds after start_window()
        self.fail_for = fail_for
        self.window = (float("inf"), float("inf"))

    def start_window(self, t0: float) -> None:
        self.window = (t0 + self.fail_from, t0 + self.fail_from + self.fail_for)

    def failing(self, now: float) -> bool:
        return self.window[0] <= now < self.window[1]

    def handle_error(self, request, client_address) -> None:
        pass  # a client that gave up on a hanging target: nothing to report


class TargetHandler(BaseHTTPRequestHandler):  # HTTP/1.0: one connection per probe
    def do_GET(self) -> None:
        kind = self.path.split("/")[1]
        status = 200
        if kind == "flaky" and self.server.failing(time.time()):
            status = 500
        elif kind == "slow":
            time.sleep(random.uniform(*SLOW_S))
        elif kind == "hang":
            time.sleep(HANG_S)
        body = b"ok\n" if status == 200 else b"down\n"
        try:
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:
            self.close_connection = True

    def log_message(self, format, *args) -> None:
        pass


def start_targets(fail_from: float, fail_for: float) -> Targets:
    targets = Targets(fail_from, fail_for)
    threading.Thread(target=targets.serve_forever, name="targets", daemon=True).start()
    return targets


def closed_port() -> socket.socket:
    """A socket bound but not listening: connecting to its port is refused, and while it stays
    open no other process takes the port."""
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    return held


# -- the application's table --


@dataclass
class Monitor:
    id: str
    kind: str
    interval_s: int
    url: str


def make_monitors(count: int, port: int, refused_port: int) -> list[Monitor]:
    monitors = []
    for i in range(count):
        kind = KINDS[i % len(KINDS)]
        interval = INTERVALS[(i // len(KINDS)) % len(INTERVALS)]
        key = str(uuid.uuid4())
        url = (
            f"http://127.0.0.1:{refused_port}/refused/{key}"
            if kind == "refused"
            else f"http://127.0.0.1:{port}/{kind}/{key}"
        )
        monitors.append(Monitor(key, kind, interval, url))
    return monitors


def connect(database: str | None = None) -> pymysql.Connection:
    return pymysql.connect(host="127.0.0.1", port=3306, user="root", database=database, autocommit=True)


def create_table(monitors: list[Monitor]) -> None:
    """The application's own table: recheck's columns come from `init-db --apply`."""
    with contextlib.closing(connect()) as db, db.cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
        cursor.execute(f"CREATE DATABASE {DATABASE}")
        cursor.execute(f"USE {DATABASE}")
        cursor.execute(
            "CREATE TABLE monitors (id CHAR(36) NOT NULL PRIMARY KEY, url VARCHAR(255) NOT NULL,"
            " interval_s INT NOT NULL, status VARCHAR(16) NOT NULL DEFAULT 'active',"
            " created_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP)"
        )
        cursor.executemany(
            "INSERT INTO monitors (id, url, interval_s) VALUES (%s, %s, %s)",
            [(m.id, m.url, m.interval_s) for m in monitors],
        )


def table_facts(monitors: list[Monitor]) -> dict:
    """After the run: the application's `status` untouched, recheck's columns per kind."""
    kinds = {m.id: m.kind for m in monitors}
    with contextlib.closing(connect(DATABASE)) as db, db.cursor() as cursor:
        cursor.execute("SELECT status, COUNT(*) FROM monitors GROUP BY status")
        app_status = {status: count for status, count in cursor.fetchall()}
        cursor.execute("SELECT id, probe_result, check_count, fail_count, checked_at IS NULL FROM monitors")
        per_kind: dict[str, dict] = {}
        for key, result, checks, fails, never in cursor.fetchall():
            facts = per_kind.setdefault(
                kinds[key], {"rows": 0, "successes": 0, "failing_now": 0, "never_attempted": 0, "results": {}}
            )
            facts["rows"] += 1
            facts["successes"] += checks
            facts["failing_now"] += fails > 0
            facts["never_attempted"] += never
            facts["results"][str(result)] = facts["results"].get(str(result), 0) + 1
    return {"application_status": app_status, "per_kind": per_kind}


# -- recheck, as a user runs it --


def environment(args: argparse.Namespace, work: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RECHECK_")}
    env.update(
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        RECHECK_CONFIG=str(work / "recheck.toml"),
        RECHECK_REDIS_URL=args.redis_url,
        RECHECK_KEY_PREFIX=KEY_PREFIX,
        RECHECK_DASHBOARD_PORT="0",
        RECHECK_METRICS_PORT="0",
        **{PROBES_ENV: str(work / "probes"), CONNECTIONS_ENV: str(args.concurrency)},
    )
    return env


def write_config(args: argparse.Namespace, work: Path) -> str:
    text = WORKLOAD_TOML.format(
        name=WORKLOAD,
        mysql_url=f"mysql://root@127.0.0.1:3306/{DATABASE}",
        longest=max(INTERVALS),
        concurrency=args.concurrency,
        check_timeout=CHECK_TIMEOUT,
        failing_threshold=args.failing_threshold,
    )
    (work / "recheck.toml").write_text(text)
    (work / "probes").mkdir()
    return text


def recheck(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "recheck", *arguments]


def clear_keys(url: str) -> int:
    """Every key under the prefix: `{uptime}:...` and `{uptime:NAME}:...`."""
    client = redis.Redis.from_url(url)
    keys = [k for pattern in ("{uptime}*", "{uptime:*") for k in client.scan_iter(match=pattern, count=1000)]
    if keys:
        client.delete(*keys)
    client.close()
    return len(keys)


@dataclass
class Sample:
    t: float  # seconds since the run started
    took: float  # the status command's own wall time
    code: int
    fresh: bool | None = None
    overdue_waiting: int = 0
    overdue_in_flight: int = 0
    in_flight: int = 0
    checks_failing: bool = False
    recent_checks: int = 0
    recent_failed: int = 0
    past_timeout: int = 0
    oldest_waiting_s: float = 0.0
    queue_depth: int = 0


def status_json(env: dict[str, str], t0: float) -> Sample:
    started = time.time()
    done = subprocess.run(
        recheck("status", "--json"),
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    sample = Sample(round(started - t0, 1), round(time.time() - started, 2), done.returncode)
    try:
        facts = json.loads(done.stdout)["workloads"][WORKLOAD]
    except (ValueError, KeyError):
        return sample
    sample.fresh = facts["fresh"]
    sample.overdue_waiting = facts["overdue_waiting"]
    sample.overdue_in_flight = facts["overdue_in_flight"]
    sample.in_flight = facts["in_flight"]
    sample.checks_failing = facts["checks_failing"]
    sample.recent_checks = facts["recent_checks"]
    sample.recent_failed = facts["recent_failed"]
    sample.past_timeout = facts["checks_past_timeout"]
    sample.oldest_waiting_s = facts["oldest_waiting_s"]
    sample.queue_depth = facts["queue_depth"]
    return sample


def status_text(env: dict[str, str], t0: float) -> dict:
    """The verdict as `recheck status` words it, and its overdue line."""
    started = time.time()
    done = subprocess.run(
        recheck("status"), env=env, cwd=REPO, capture_output=True, text=True, timeout=30, check=False
    )
    lines = done.stdout.rstrip().splitlines() or [done.stderr.strip()]
    overdue = next((line.strip() for line in lines if line.strip().startswith("overdue > 1 s")), "")
    return {
        "t": round(started - t0, 1),
        "code": done.returncode,
        "overdue": overdue,
        "verdict": lines[-1].strip(),
    }


def watch(run: subprocess.Popen, env: dict, t0: float, args: argparse.Namespace) -> tuple[list, list]:
    """`recheck status --json` once a second while the run lasts; the text verdict at a few moments:
    before, in and after the failure window, and near the end."""
    window_end = args.fail_from + args.fail_for
    verdict_at = sorted({15.0, args.fail_from + args.fail_for / 2, window_end + 10, args.seconds - 8})
    samples, verdicts = [], []
    while run.poll() is None and time.time() - t0 < args.seconds:
        tick = time.time()
        if verdict_at and tick - t0 >= verdict_at[0]:
            verdict_at.pop(0)
            verdicts.append(status_text(env, t0))
        else:
            samples.append(status_json(env, t0))
        time.sleep(max(0.0, 1.0 - (time.time() - tick)))
    return samples, verdicts


# -- the figures --


@dataclass
class Probe:
    start: float
    end: float
    outcome: str

    @property
    def up(self) -> bool:
        return self.outcome == "up"


def read_probes(folder: Path) -> dict[str, list[Probe]]:
    probes: dict[str, list[Probe]] = {}
    for path in folder.glob("probes-*.tsv"):
        for line in path.read_text().splitlines():
            key, start, end, outcome = line.split("\t")
            probes.setdefault(key, []).append(Probe(float(start), float(end), outcome))
    for each in probes.values():
        each.sort(key=lambda p: p.start)
    return probes


def recovery(monitor: Monitor, probes: list[Probe], window: tuple[float, float]) -> dict:
    """One flaky monitor: its probes in the window, and the delay from the window's end to its
    first successful probe, with the bound: its interval plus both probes' own time."""
    w0, w1 = window
    inside = [p for p in probes if w0 <= p.start < w1]
    first_up = next((p for p in probes if p.up and p.end >= w1), None)
    last_failed = next((p for p in reversed(probes) if p.start < w1 and not p.up), None)
    found = {
        "interval_s": monitor.interval_s,
        "in_window": len(inside),
        "failed_in_window": sum(not p.up for p in inside),
    }
    if first_up is None:
        return found | {"delay_s": None}
    checks_time = (first_up.end - first_up.start) + (
        last_failed.end - last_failed.start if last_failed else 0
    )
    delay = first_up.end - w1
    return found | {
        "delay_s": round(delay, 3),
        "bound_s": round(monitor.interval_s + checks_time, 3),
        "excess_s": round(delay - monitor.interval_s - checks_time, 3),
    }


def rhythm(monitor: Monitor, probes: list[Probe], after: float) -> list[float]:
    """From each probe's end to the next one's start, minus the monitor's interval (jitter makes
    it up to 5 % early; write-back, dispatch and queue make it later)."""
    return [b.start - a.end - monitor.interval_s for a, b in itertools.pairwise(probes) if a.start >= after]


def spread(values: list[float]) -> dict:
    if not values:
        return {"n": 0}
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return {
        "n": len(values),
        "min": round(ordered[0], 3),
        "p50": round(statistics.median(ordered), 3),
        "p99": round(p99, 3),
        "max": round(ordered[-1], 3),
    }


def figures(monitors, probes, samples, window, t0, seconds) -> dict:
    flaky = [recovery(m, probes.get(m.id, []), window) for m in monitors if m.kind == "flaky"]
    recoveries = {}
    for interval in INTERVALS:
        rows = [r for r in flaky if r["interval_s"] == interval]
        recovered = [r for r in rows if r["delay_s"] is not None]
        recoveries[interval] = {
            "monitors": len(rows),
            "recovered": len(recovered),
            "probes_in_window": spread([r["in_window"] for r in rows]),
            "expected_in_window": round((window[1] - window[0]) / interval, 1),
            "delay_s": spread([r["delay_s"] for r in recovered]),
            "excess_s": spread([r["excess_s"] for r in recovered]),
            "over_bound": sum(r["excess_s"] > 0 for r in recovered),
        }
    rhythms = {}
    for kind in dict.fromkeys(KINDS):
        for interval in INTERVALS:
            gaps = [
                g
                for m in monitors
                if m.kind == kind and m.interval_s == interval
                for g in rhythm(m, probes.get(m.id, []), t0 + WARM_UP)
            ]
            rhythms[f"{kind} {interval}s"] = spread(gaps)
    every = [p for each in probes.values() for p in each]
    steady = [s for s in samples if s.t >= WARM_UP and s.fresh is not None]
    in_flight = [s for s in steady if s.overdue_in_flight > 0]
    return {
        "probes": len(every),
        "probes_per_s": round(len(every) / seconds, 1),
        "probes_failed": sum(not p.up for p in every),
        "outcomes": count(p.outcome for p in every),
        "recovery": recoveries,
        "never_recovered": [r for r in flaky if r["delay_s"] is None],
        "rhythm_s": rhythms,
        "status": {
            "samples": len(samples),
            "after_warm_up": len(steady),
            "fresh": sum(bool(s.fresh) for s in steady),
            "with_overdue_in_flight": len(in_flight),
            "fresh_with_overdue_in_flight": sum(bool(s.fresh) for s in in_flight),
            "overdue_in_flight": spread([s.overdue_in_flight for s in steady]),
            "overdue_waiting_max": max((s.overdue_waiting for s in steady), default=0),
            "failed_share_max": round(
                max((s.recent_failed / max(s.recent_checks, 1) for s in steady), default=0), 3
            ),
            "not_fresh": [asdict(s) for s in steady if not s.fresh],
            "command_s": spread([s.took for s in samples]),
        },
    }


def count(values) -> dict[str, int]:
    counted: dict[str, int] = {}
    for value in values:
        counted[value] = counted.get(value, 0) + 1
    return dict(sorted(counted.items(), key=lambda kv: -kv[1]))


def report(found: dict, args: argparse.Namespace) -> str:
    window = f"{args.fail_from:g}-{args.fail_from + args.fail_for:g} s"
    lines = [
        f"{found['probes']:,} probes ({found['probes_per_s']:,}/s), {found['probes_failed']:,} failed: "
        + ", ".join(f"{k} {v:,}" for k, v in found["outcomes"].items()),
        "",
        f"flaky monitors (500 from {window}): probes in the window; recovery: the window's end to the "
        "first success (delay), less the interval and the failed and successful probes' time (excess)",
        f"{'interval':>8} {'monitors':>8} {'probes in window':>22} {'expected':>8} {'recovered':>9} "
        f"{'delay p50 / max':>16} {'excess p50 / max':>17} {'over bound':>10}",
    ]
    for interval, r in found["recovery"].items():
        p, d, e = r["probes_in_window"], r["delay_s"], r["excess_s"]
        lines.append(
            f"{interval:>7}s {r['monitors']:>8} {mean_range(p):>22} {r['expected_in_window']:>8} "
            f"{r['recovered']:>9} {pair(d):>16} {pair(e):>17} {r['over_bound']:>10}"
        )
    lines += [
        "",
        "rhythm: next probe's start - previous probe's end - interval (after warm-up), seconds",
        f"{'monitors':>12} {'gaps':>6} {'min':>7} {'p50':>7} {'p99':>7} {'max':>7}",
    ]
    for name, g in found["rhythm_s"].items():
        if g["n"]:
            lines.append(
                f"{name:>12} {g['n']:>6} {g['min']:>7.3f} {g['p50']:>7.3f} {g['p99']:>7.3f} {g['max']:>7.3f}"
            )
    lines += ["", status_line(found["status"])]
    for sample in found["status"]["not_fresh"]:
        lines.append(f"  not fresh at {sample['t']} s: {sample}")
    return "\n".join(lines)


def status_line(s: dict) -> str:
    in_flight = s["overdue_in_flight"]
    return (
        f"status --json: {s['samples']} samples, {s['after_warm_up']} after {WARM_UP:g} s, "
        f"{s['fresh']} of them fresh; {s['with_overdue_in_flight']} with rows past due in flight "
        f"(overdue_in_flight p50 {in_flight.get('p50', 0)}, max {in_flight.get('max', 0)}), "
        f"{s['fresh_with_overdue_in_flight']} of those fresh; "
        f"most overdue_waiting {s['overdue_waiting_max']}; "
        f"highest failed share in a minute {s['failed_share_max']:.0%}; "
        f"one status call {s['command_s'].get('p50', 0)} s (p50)"
    )


def mean_range(s: dict) -> str:
    return f"{s['p50']:g} ({s['min']:g}-{s['max']:g})" if s["n"] else "-"


def pair(s: dict) -> str:
    return f"{s['p50']:.2f} / {s['max']:.2f}" if s["n"] else "-"


# -- the run --


def run_recheck(args, env, work: Path, targets: Targets) -> tuple[float, int, str, list, list]:
    with open(work / "run.log", "w") as log:
        t0 = time.time()
        targets.start_window(t0)
        command = recheck("run", "--workers", str(args.workers), "--duration", f"{args.seconds:g}")
        run = subprocess.Popen(command, env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        try:
            samples, verdicts = watch(run, env, t0, args)
            code = run.wait(timeout=args.seconds + 60)
        finally:
            if run.poll() is None:
                run.terminate()
                run.wait()
    return t0, code, (work / "run.log").read_text(), samples, verdicts


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.uptime", description=__doc__.split("\n")[0])
    parser.add_argument("--monitors", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=90.0, help="how long `recheck run` runs")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=200, help="probes at once per worker")
    parser.add_argument("--fail-from", type=float, default=20.0, help="flaky targets answer 500 from ...")
    parser.add_argument("--fail-for", type=float, default=20.0, help="... for this many seconds")
    parser.add_argument(
        "--failing-threshold",
        type=float,
        default=0.25,
        help="the workload's normal share of failing checks (hang, refused and flaky targets)",
    )
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--out", default="bench-results", help="where the JSON of the figures goes")
    parser.add_argument("--keep", action="store_true", help="keep the database and the run's folder")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    work = Path(tempfile.mkdtemp(prefix="uptime-"))
    targets = start_targets(args.fail_from, args.fail_for)
    held = closed_port()
    monitors = make_monitors(args.monitors, targets.server_address[1], held.getsockname()[1])
    env = environment(args, work)
    cpu_before = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    load_before = os.getloadavg()
    try:
        create_table(monitors)
        config = write_config(args, work)
        clear_keys(args.redis_url)
        init = subprocess.run(
            recheck("init-db", "--apply"), env=env, cwd=REPO, capture_output=True, text=True, check=False
        )
        if init.returncode != 0:
            print(init.stdout + init.stderr, file=sys.stderr)
            return 1
        print(
            f"{len(monitors):,} monitors; targets on port {targets.server_address[1]}; running "
            f"`recheck run --workers {args.workers} --duration {args.seconds:g}` ...",
            flush=True,
        )
        t0, code, run_log, samples, verdicts = run_recheck(args, env, work, targets)
        window = targets.window
        found = figures(monitors, read_probes(work / "probes"), samples, window, t0, args.seconds)
        found["table"] = table_facts(monitors)
    finally:
        targets.shutdown()
        held.close()
        clear_keys(args.redis_url)
        if not args.keep:
            with contextlib.closing(connect()) as db, db.cursor() as cursor:
                cursor.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
    cpu = cpu_used(cpu_before)
    print(report(found, args))
    print("\n`recheck status` at a few moments:")
    for v in verdicts:
        print(f"  [{v['t']:5.1f} s] exit {v['code']}: {v['overdue']}\n          {v['verdict']}")
    print(f"\nrecheck run exited {code}; its last lines:\n" + "\n".join(run_log.rstrip().splitlines()[-6:]))
    print(f"application's status column after the run: {found['table']['application_status']}")
    print(
        f"CPU seconds: this process (targets, sampler) {cpu['self']:.1f}, its children (recheck run and "
        f"its processes, status calls) {cpu['children']:.1f}; load average before {load_before[0]:.2f}, "
        f"after {os.getloadavg()[0]:.2f}"
    )
    saved = save(args, found, verdicts, samples, config, code, run_log, cpu)
    print(f"figures: {saved}" + (f"; run folder {work}" if args.keep else ""))
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def cpu_used(before) -> dict[str, float]:
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "self": me.ru_utime + me.ru_stime - before[0].ru_utime - before[0].ru_stime,
        "children": children.ru_utime + children.ru_stime - before[1].ru_utime - before[1].ru_stime,
    }


def save(args, found, verdicts, samples, config, code, run_log, cpu) -> Path:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / time.strftime("uptime-%Y%m%d-%H%M%S.json")
    everything = {
        "arguments": vars(args),
        "config": config,
        "figures": found,
        "verdicts": verdicts,
        "samples": [asdict(s) for s in samples],
        "run_exit": code,
        "run_log": run_log,
        "cpu_s": cpu,
        "load_after": os.getloadavg(),
    }
    path.write_text(json.dumps(everything, indent=1, default=str))
    return path


if __name__ == "__main__":
    raise SystemExit(main())
