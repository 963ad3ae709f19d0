"""A recheck cluster of real processes with private servers, and the invariants to check after a fault.

Every fault test follows the same shape: start MariaDB, Redis, dispatcher(s) and workers;
let one full interval pass; inject the fault while the table is being rechecked; stop
gracefully; then judge the run from MySQL alone (an audit trigger records every write) and
from the ids the check function recorded:

- lateness: how long after its due time each cycle was written; its maximum is the recovery
  bound the fault needs (a row is checked again within interval + that bound);
- stuck rows: rows still overdue at the end, after a patience (a lost row would stay here);
- premature writes: a result written for a due time that had not come yet (a stale worker
  overwriting a newer cycle: what fencing prevents);
- double writes: one (row, due time) written twice;
- broken chains: a write whose old due time is not the previous write's new due time (a
  cycle lost or overwritten out of band);
- duplicate checks: check invocations minus writes (at-least-once costs: a worker killed
  after checking, a paused worker whose result was fenced out);
- quarantined rows: the checks here never kill a worker, so none may end in quarantine.

The recheck processes log in as a least-privilege MySQL user (SELECT and UPDATE on the table),
as compose's do: read_only binds them (it does not bind root). Any of them can be started
behind a FaultProxy (tests/support/faultproxy.py) to cut, slow or partition its connections.
"""

from __future__ import annotations

import random
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from recheck.commands.init_db import create_app_user, init_db
from recheck.shared.config import Settings, Workload
from recheck.shared.core.entries import parse_entries
from recheck.shared.redis.connection import connect_redis
from recheck.shared.redis.store import open_store
from tests.support.faultproxy import FaultProxy
from tests.support.helpers import audit_violations, install_audit, scalar, seed_rows, workload
from tests.support.processes import TEST_TIMINGS, Processes
from tests.support.servers import MariaDBServer, RedisCluster, RedisServer, wait_for

APP_PASSWORD = "chaos-app-pass"
# Two workloads in the same processes: the first keeps the keys a deployment without a file has.
SECOND_WORKLOAD = """
[workloads.default]
table = "user_block_status"

[workloads.second]
table = "second_rows"
interval = 3
"""


def audit_of(admin: Settings) -> str:
    """The audit table of a workload's table (the first workload's is plain `audit`)."""
    return "audit" if admin.table == "user_block_status" else f"audit_{admin.table}"


# How much longer than its settling time a run may take to have no stuck row (see finish).
STUCK_PATIENCE_S = 15.0

CHAOS_SETTINGS = {
    **TEST_TIMINGS,
    "interval": 2.0,
    "worker_batch": 200,
    # Fixed takes of 200: the faults' bounds and duplicate counts are stated per batch.
    "worker_take_max": 200,
    "leader_ttl": 1.0,
}


@dataclass
class Report:
    fault: str
    rows: int
    writes: int
    max_lateness_s: float
    stuck_rows: int
    premature: int
    double: int
    broken_chains: int
    invocations: int
    duplicates: int
    quarantined: int = 0
    # The ids killed workers held (Cluster.kill_worker_mid_batch): how many, and the most any of
    # them was late when its due cycle was written (by its reclaim, or by the victim just before).
    killed_ids: int = 0
    killed_ids_lateness_s: float = 0.0
    events: list[str] = field(default_factory=list)
    others: list[Report] = field(default_factory=list)  # the other workloads' tables, judged alike

    def line(self) -> str:
        killed = (
            f" (the {self.killed_ids} ids killed workers held: {self.killed_ids_lateness_s:.2f} s)"
            if self.killed_ids
            else ""
        )
        return (
            f"{self.fault}: {self.writes} writes of {self.rows} rows, "
            f"max lateness {self.max_lateness_s:.2f} s{killed}, "
            f"duplicates {self.duplicates}, stuck {self.stuck_rows}, premature {self.premature}, "
            f"double {self.double}, broken chains {self.broken_chains}, quarantined {self.quarantined}"
        )

    def assert_invariants(self, bound_s: float, max_duplicates: int, of_killed_ids: bool = False) -> None:
        """Every table's invariants; duplicates are counted over all of them together.

        of_killed_ids: the lateness bound is the one docs/guarantees.md gives for a kill -9, on the
        ids the killed workers held; every other row's lateness is the deployment's capacity
        (on time "while workers keep up"), reported and not bounded here."""
        for report in [self, *self.others]:
            print(report.line())
        for event in self.events:
            print(f"  {event}")
        for report in [self, *self.others]:
            assert report.premature == 0, report.line()
            assert report.double == 0, report.line()
            assert report.broken_chains == 0, report.line()
            assert report.stuck_rows == 0, report.line()
            assert report.quarantined == 0, report.line()
            late = report.killed_ids_lateness_s if of_killed_ids else report.max_lateness_s
            assert late <= bound_s, f"{report.line()} (bound {bound_s:.2f} s)"
        assert 0 <= self.duplicates <= max_duplicates, f"{self.line()} (bound {max_duplicates})"


class Cluster:
    def __init__(self, tmp_path: Path, procs: Processes, rows: int = 5000, mysql_extra: tuple[str, ...] = (),
                 workloads: int = 1, redis_cluster: bool = False, **overrides):  # fmt: skip
        """workloads=2: a second workload on a table of its own (a fifth of the rows, every 3 s)
        runs beside the first in the same processes, through a workloads file. redis_cluster: a
        Redis Cluster of 3 masters and 3 replicas instead of one Redis (with partitions=16
        unless the overrides say otherwise)."""
        self.tmp = tmp_path
        self.procs = procs
        self.rows = rows
        self.mysql = MariaDBServer(tmp_path / "mysql", extra=mysql_extra)
        self.redis = RedisCluster(tmp_path / "redis") if redis_cluster else RedisServer(tmp_path / "redis")
        if redis_cluster:
            overrides.setdefault("partitions", 16)
        self.record = tmp_path / "record"
        self.carried_s = 0.0  # see lateness_of
        self.killed_held: dict[str, list[bytes]] = {}  # table -> entries held by killed workers
        self.record.mkdir()
        # The administrator (the tests' eyes, seeding, init-db) and what the processes run as.
        self.admin = Settings(
            _env_file=None,
            mysql_url=self.mysql.url("recheck"),
            redis_url=self.redis.url(),
            app_user="recheck",
            app_password=APP_PASSWORD,
            **{**CHAOS_SETTINGS, **overrides},
        ).default_workload()
        self.settings = self.admin.evolve(
            **{"mysql_url": self.mysql.url("recheck", "recheck", APP_PASSWORD), "app_user": ""}
        )
        self.second: Workload | None = None  # the second workload's admin settings
        if workloads == 2:
            config = tmp_path / "recheck.toml"
            config.write_text(SECOND_WORKLOAD)
            self.admin, self.settings = (
                s.evolve(**{"config": str(config)}) for s in (self.admin, self.settings)
            )
            self.second = workload(self.admin, "second", table="second_rows", interval=3.0)
        self.stores: dict = {}
        self.proxies: list[FaultProxy] = []
        self.workers: list[subprocess.Popen] = []
        self.dispatchers: list[subprocess.Popen] = []
        self.events: list[str] = []
        self.started_at = 0.0

    # -- setting up -------------------------------------------------------------------------
    def start(self, workers: int = 3, dispatchers: int = 1, check: str = "tests.support.checks:ok",
              env: dict | None = None, proxied: bool = False,
              dispatcher_env: dict | None = None) -> None:  # fmt: skip
        """proxied: every process reaches MySQL and Redis through one proxy each (self.proxies);
        dispatcher_env: the first dispatcher's own variables (e.g. to reach a server through a proxy)."""
        self.mysql.start()
        self.redis.start()
        for admin in self.tables():
            assert init_db(admin, apply=False, say=lambda _: None, create=True) == 0
            create_app_user(admin, say=lambda _: None)
        if proxied:
            self.settings = self.settings.evolve(**self.through(self.proxy("mysql"), self.proxy("redis")))
        self.conn = self.mysql.connect("recheck")
        for admin in self.tables():
            install_audit(self.conn, admin, audit=audit_of(admin))
        self.check = check
        self.worker_env = env or {}
        for number in range(dispatchers):
            self.start_dispatcher(env=dispatcher_env if number == 0 else None)
        for _ in range(workers):
            self.start_worker()
        # Seed once everything runs: due times stay evenly spread over the interval. Rows that
        # fell due during start-up would be checked in one burst and, since the next due time
        # is checked_at + interval, stay a burst every interval.
        store = self.store()
        wait_for(lambda: len(store.worker_ids()) == workers and store.lease_holder(), 30, "processes up")
        seed_rows(self.admin, self.rows)
        if self.second is not None:
            seed_rows(self.second, self.rows // 5)
        wait_for(lambda: self.unchecked() == 0, 30, "the first full cycle")
        self.started_at = time.monotonic()
        self.baseline = scalar(self.conn, "SELECT NOW(3)")

    def start_worker(self, env: dict | None = None) -> subprocess.Popen:
        environment = {
            "RECHECK_CHECK": self.check,
            "TEST_CHECK_RECORD": str(self.record),
            **self.worker_env,
            **(env or {}),
        }
        worker = self.procs.start("worker", self.settings, env=environment)
        self.workers.append(worker)
        return worker

    def start_dispatcher(self, env: dict | None = None) -> subprocess.Popen:
        dispatcher = self.procs.start("dispatcher", self.settings, env=env)
        self.dispatchers.append(dispatcher)
        return dispatcher

    def proxy(self, server: str) -> FaultProxy:
        """A fault proxy in front of "mysql" or "redis" (closed with the cluster)."""
        target = {"mysql": self.mysql, "redis": self.redis}[server]
        self.proxies.append(FaultProxy("127.0.0.1", target.port).start())
        return self.proxies[-1]

    def through(self, mysql: FaultProxy | None = None, redis: FaultProxy | None = None) -> dict:
        """Settings (mysql_url, redis_url) that reach the servers through these proxies."""
        urls = {}
        if mysql is not None:
            urls["mysql_url"] = self.settings.mysql_url.replace(f":{self.mysql.port}/", f":{mysql.port}/")
        if redis is not None:
            urls["redis_url"] = self.settings.deployment.redis_url.replace(
                f":{self.redis.port}/", f":{redis.port}/"
            )
        return urls

    def env_through(self, mysql: FaultProxy | None = None, redis: FaultProxy | None = None) -> dict:
        """The same, as a process's RECHECK_* variables."""
        return {f"RECHECK_{name.upper()}": url for name, url in self.through(mysql, redis).items()}

    def holder_of(self, processes: list[subprocess.Popen], key: str) -> subprocess.Popen | None:
        """The process whose id (host-pid-random) is stored at a Redis key, e.g. the leader's."""
        value = self.redis.client().get(key)
        pid = int(value.decode().split("-")[-2]) if value else None
        return next((p for p in processes if p.pid == pid), None)

    def live(self, processes: list[subprocess.Popen]) -> list[subprocess.Popen]:
        return [p for p in processes if p.poll() is None]

    def tables(self) -> list[Settings]:
        """Each workload's (administrator's) settings: its table."""
        return [self.admin, *([self.second] if self.second else [])]

    def unchecked(self) -> int:
        return sum(
            scalar(self.conn, f"SELECT COUNT(*) FROM `{admin.table}` WHERE check_count = 0")
            for admin in self.tables()
        )

    def note(self, event: str) -> None:
        self.events.append(f"[{time.monotonic() - self.started_at:5.1f}s] {event}")

    # -- faults -----------------------------------------------------------------------------
    def store(self, admin: Settings | None = None):
        """A workload's Redis state as recheck sees it (every partition, on one Redis or a cluster)."""
        admin = admin or self.admin
        if admin.table not in self.stores:  # the tests' own eyes: straight to the servers, no proxy
            self.stores[admin.table] = open_store(connect_redis(admin.deployment), admin)
        return self.stores[admin.table]

    def held_entries(self, process: subprocess.Popen) -> list[bytes]:
        """The entries a worker process holds right now, in every workload."""
        return [entry for held in self.held_per_table(process).values() for entry in held]

    def held_per_table(self, process: subprocess.Popen) -> dict[str, list[bytes]]:
        """The same, per workload's table."""
        held: dict[str, list[bytes]] = {}
        for admin in self.tables():
            store = self.store(admin)
            for worker in (w for w in store.worker_ids() if f"-{process.pid}-" in w):
                held.setdefault(admin.table, []).extend(store.held(worker))
        return held

    def held_by(self, process: subprocess.Popen) -> int:
        """How many entries a worker process holds right now, in every workload."""
        return len(self.held_entries(process))

    def lateness_of(self, held: list[bytes]) -> float:
        """How late (by MySQL's clock) the oldest of a worker's held entries already is, in
        seconds (0 if none): what a batch caught by a fault carries before the fault adds its own
        delay. Recorded in self.carried_s, the most any fault caught so far."""
        now_ms = scalar(self.conn, "SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01', NOW(3)) DIV 1000")
        items, _ = parse_entries(held)
        late = max(0.0, (int(now_ms) - min(item.due_ms for item in items)) / 1000) if items else 0.0
        self.carried_s = max(self.carried_s, late)
        return late

    def kill_worker_mid_batch(self) -> int:
        """kill -9 a random worker that holds a batch right now; returns how many ids it held."""

        def holding():
            candidates = [(p, self.held_by(p)) for p in self.live(self.workers)]
            candidates = [(p, n) for p, n in candidates if n]
            return random.choice(candidates) if candidates else None

        victim, _ = wait_for(holding, 10, "a worker holding a batch")
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        # Counted after the kill: between a look and the signal the victim may have written its
        # batch and taken the next one. Its in-flight sets stay as they are until it is reclaimed.
        per_table = self.held_per_table(victim)
        for table, entries in per_table.items():
            self.killed_held.setdefault(table, []).extend(entries)
        held = [entry for entries in per_table.values() for entry in entries]
        late = self.lateness_of(held)
        self.note(f"kill -9 worker pid {victim.pid} holding {len(held)} ids, {late:.2f} s late")
        return len(held)

    def kill_the_leader(self) -> float:
        """kill -9 the dispatcher holding the lease (of every partition); returns the seconds
        until another one holds every lease and has dispatched."""
        store = self.store()
        old = int(store.lease_holder().split("-")[-2])  # ids are host-pid-random
        victim = next(p for p in self.dispatchers if p.pid == old)
        victim.kill()
        killed = time.monotonic()
        self.note(f"kill -9 leader pid {old}")

        def standby_leads_and_dispatches() -> bool:
            holders = set(store.lease_holders())
            if len(holders) != 1 or None in holders or f"-{old}-" in next(iter(holders)):
                return False
            beat = [d for d in store.live_dispatchers() if d.id in holders]
            return bool(beat) and beat[0].dispatched > 0

        wait_for(standby_leads_and_dispatches, 15, "the standby to take every lease and dispatch")
        takeover = time.monotonic() - killed
        self.note(f"standby leading and dispatching {takeover:.2f} s after the kill")
        return takeover

    def pause(self, seconds: float) -> None:
        """Let the cluster run (a sampling period, not a wait for a condition)."""
        time.sleep(seconds)

    # -- judging ----------------------------------------------------------------------------
    def finish(self, fault: str, settle_s: float = 1.0, stuck_after_s: float = 3.0,
               exited: tuple[subprocess.Popen, ...] = ()) -> Report:  # fmt: skip
        """Let things settle, measure stuck rows, stop gracefully, then judge from MySQL.

        Settling: the run goes on for settle_s, then until every row due by then has been written
        again (so its lateness is in the audit, however late the fault made it), for at most
        STUCK_PATIENCE_S more (a lost row stays overdue forever; a busy machine's recovery may
        need the extra seconds, which the lateness bound judges on its own). Stuck rows are those
        still overdue by more than stuck_after_s after that.
        exited: processes the test itself stopped (their exit codes were judged by the test)."""
        self.pause(settle_s)
        cut = scalar(self.conn, "SELECT NOW(3)")
        deadline = time.monotonic() + STUCK_PATIENCE_S
        while time.monotonic() < deadline and any(self._due_by(admin, cut) for admin in self.tables()):
            time.sleep(0.1)  # polling for a condition
        while True:
            stuck = {admin.table: self._stuck(admin, stuck_after_s) for admin in self.tables()}
            if not any(stuck.values()) or time.monotonic() > deadline:
                break
            time.sleep(0.25)  # polling for a condition
        codes = self.procs.stop_all(timeout=30)
        judged = {process.pid for process in exited}
        bad = {
            pid: code for pid, code in codes.items() if code not in (0, -signal.SIGKILL) and pid not in judged
        }
        assert not bad, f"processes exited badly: {bad}\n{self.procs.logs()}"
        reports = [self._judge(fault, admin, stuck[admin.table]) for admin in self.tables()]
        invocations = sum(len(path.read_text().split()) for path in self.record.glob("*.ids"))
        first = reports[0]
        first.invocations = invocations
        first.duplicates = invocations - sum(report.writes for report in reports)
        first.events, first.others = self.events, reports[1:]
        return first

    def _due_by(self, admin: Settings, cut) -> int:
        """Rows of a workload's table still due at or before `cut` (MySQL's time): not yet
        written again since."""
        query = f"SELECT COUNT(*) FROM `{admin.table}` WHERE next_check_at <= %s"
        return int(scalar(self.conn, query, (cut,)))

    def _stuck(self, admin: Settings, stuck_after_s: float) -> int:
        return int(scalar(
            self.conn,
            f"SELECT COUNT(*) FROM `{admin.table}` WHERE next_check_at < NOW(3) - INTERVAL %s MICROSECOND",
            (round(stuck_after_s * 1e6),),
        ))  # fmt: skip

    def _judge(self, fault: str, admin: Settings, stuck: int) -> Report:
        """One workload's table, judged from its audit trail alone."""
        audit, table = audit_of(admin), admin.table
        violations = audit_violations(self.conn, audit)
        lateness = scalar(
            self.conn,
            f"SELECT COALESCE(MAX(TIMESTAMPDIFF(MICROSECOND, old_due, written_at)), 0) / 1e6 FROM {audit} "
            "WHERE new_count = old_count + 1 AND old_due >= %s",
            (self.baseline,),
        )
        broken = scalar(
            self.conn,
            "SELECT COUNT(*) FROM (SELECT old_due, "
            "LAG(new_due) OVER (PARTITION BY row_id ORDER BY written_at, old_due) AS previous "
            f"FROM {audit}) AS chain WHERE previous IS NOT NULL AND previous <> old_due",
        )
        killed = self._killed_ids_lateness(admin)
        writes = scalar(self.conn, f"SELECT COALESCE(SUM(check_count), 0) FROM `{table}`")
        quarantined = scalar(self.conn, f"SELECT COUNT(*) FROM `{table}` WHERE YEAR(next_check_at) = 9999")
        rows = int(scalar(self.conn, f"SELECT COUNT(*) FROM `{table}`"))
        return Report(
            fault=fault if admin is self.admin else f"  {fault} (workload {admin.name})",
            rows=rows,
            writes=int(writes),
            max_lateness_s=float(lateness),
            stuck_rows=stuck,
            premature=violations["premature"],
            double=violations["double"],
            broken_chains=int(broken),
            invocations=0,
            duplicates=0,
            quarantined=int(quarantined),
            killed_ids=len(killed),
            killed_ids_lateness_s=max(killed, default=0.0),
        )

    def _killed_ids_lateness(self, admin: Settings) -> list[float]:
        """How late each entry a killed worker held was when its due cycle was written (from the
        audit: the write whose old due time is the entry's). An entry whose cycle was never
        written counts as late as the run is long (its row is stuck, judged on its own too)."""
        items, _ = parse_entries(self.killed_held.get(admin.table, []))
        if not items:
            return []
        ids = sorted({str(item.id).encode() for item in items})
        with self.conn.cursor() as cursor:
            cursor.execute(
                "SELECT row_id, TIMESTAMPDIFF(MICROSECOND, '1970-01-01', old_due) DIV 1000, "
                f"TIMESTAMPDIFF(MICROSECOND, old_due, written_at) / 1e6 FROM {audit_of(admin)} "
                f"WHERE new_count = old_count + 1 AND row_id IN ({', '.join(['%s'] * len(ids))})",
                ids,
            )
            rows = cursor.fetchall()
        written = {(bytes(row_id), int(due_ms)): float(late) for row_id, due_ms, late in rows}
        never = time.monotonic() - self.started_at
        return [written.get((str(item.id).encode(), item.due_ms), never) for item in items]

    def close(self) -> None:
        for proxy in self.proxies:
            proxy.close()
        self.redis.kill()
        self.mysql.kill()
