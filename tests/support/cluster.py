"""A recheck cluster of real processes with private servers, and the invariants to check after a fault.

Every fault test follows the same shape: start MariaDB, Redis, dispatcher(s) and workers;
let one full interval pass; inject the fault while the table is being rechecked; stop
gracefully; then judge the run from MySQL alone (an audit trigger records every write) and
from the ids the check function recorded:

- lateness: how long after its due time each cycle was written; its maximum is the recovery
  bound the fault needs (a row is checked again within interval + that bound);
- stuck rows: rows overdue by more than the bound at the end (a lost row would stay here);
- premature writes: a result written for a due time that had not come yet (a stale worker
  overwriting a newer cycle: what fencing prevents);
- double writes: one (row, due time) written twice;
- broken chains: a write whose old due time is not the previous write's new due time (a
  cycle lost or overwritten out of band);
- duplicate checks: check invocations minus writes (at-least-once costs: a worker killed
  after checking, a paused worker whose result was fenced out).
"""

from __future__ import annotations

import random
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.servers import MariaDBServer, RedisServer, wait_for
from shared.config import Settings
from shared.keys import Keys
from shared.schema import init_db
from tests.support.helpers import audit_violations, install_audit, scalar, seed_rows
from tests.support.processes import TEST_TIMINGS, Processes

CHAOS_SETTINGS = {
    **TEST_TIMINGS,
    "interval": 2.0,
    "worker_batch": 200,
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
    events: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (
            f"{self.fault}: {self.writes} writes of {self.rows} rows, "
            f"max lateness {self.max_lateness_s:.2f} s, "
            f"duplicates {self.duplicates}, stuck {self.stuck_rows}, premature {self.premature}, "
            f"double {self.double}, broken chains {self.broken_chains}"
        )

    def assert_invariants(self, bound_s: float, max_duplicates: int) -> None:
        print(self.line())
        for event in self.events:
            print(f"  {event}")
        assert self.premature == 0, self.line()
        assert self.double == 0, self.line()
        assert self.broken_chains == 0, self.line()
        assert self.stuck_rows == 0, self.line()
        assert self.max_lateness_s <= bound_s, f"{self.line()} (bound {bound_s:.2f} s)"
        assert 0 <= self.duplicates <= max_duplicates, f"{self.line()} (bound {max_duplicates})"


class Cluster:
    def __init__(self, tmp_path: Path, procs: Processes, rows: int = 5000, mysql_extra: tuple[str, ...] = (),
                 **overrides):  # fmt: skip
        self.tmp = tmp_path
        self.procs = procs
        self.rows = rows
        self.mysql = MariaDBServer(tmp_path / "mysql", extra=mysql_extra)
        self.redis = RedisServer(tmp_path / "redis")
        self.record = tmp_path / "record"
        self.record.mkdir()
        self.settings = Settings(
            _env_file=None,
            mysql_url=self.mysql.url("recheck"),
            redis_url=self.redis.url(),
            **{**CHAOS_SETTINGS, **overrides},
        )
        self.workers: list[subprocess.Popen] = []
        self.dispatchers: list[subprocess.Popen] = []
        self.events: list[str] = []
        self.started_at = 0.0

    # -- setting up -------------------------------------------------------------------------
    def start(self, workers: int = 3, dispatchers: int = 1, check: str = "tests.support.checks:ok",
              env: dict | None = None) -> None:  # fmt: skip
        self.mysql.start()
        self.redis.start()
        assert init_db(self.settings, apply=False, say=lambda _: None) == 0
        self.conn = self.mysql.connect("recheck")
        install_audit(self.conn, self.settings)
        self.check = check
        self.worker_env = env or {}
        for _ in range(dispatchers):
            self.start_dispatcher()
        for _ in range(workers):
            self.start_worker()
        # Seed once everything runs: due times stay evenly spread over the interval. Rows that
        # fell due during start-up would be checked in one burst and, since the next due time
        # is checked_at + interval, stay a burst every interval.
        keys, rds = Keys(self.settings.key_prefix), self.redis.client()
        wait_for(lambda: rds.scard(keys.workers) == workers and rds.get(keys.leader), 30, "processes up")
        seed_rows(self.settings, self.rows)
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

    def start_dispatcher(self) -> subprocess.Popen:
        dispatcher = self.procs.start("dispatcher", self.settings)
        self.dispatchers.append(dispatcher)
        return dispatcher

    def live(self, processes: list[subprocess.Popen]) -> list[subprocess.Popen]:
        return [p for p in processes if p.poll() is None]

    def unchecked(self) -> int:
        return scalar(self.conn, "SELECT COUNT(*) FROM user_block_status WHERE check_count = 0")

    def note(self, event: str) -> None:
        self.events.append(f"[{time.monotonic() - self.started_at:5.1f}s] {event}")

    # -- faults -----------------------------------------------------------------------------
    def held_by(self, process: subprocess.Popen) -> int:
        """How many entries a worker process holds right now."""
        keys = Keys(self.settings.key_prefix)
        rds = self.redis.client()
        ids = [w.decode() for w in rds.smembers(keys.workers) if f"-{process.pid}-" in w.decode()]
        return rds.scard(keys.processing(ids[0])) if ids else 0

    def kill_worker_mid_batch(self) -> int:
        """kill -9 a random worker that holds a batch right now; returns how many ids it held."""

        def holding():
            candidates = [(p, self.held_by(p)) for p in self.live(self.workers)]
            candidates = [(p, n) for p, n in candidates if n]
            return random.choice(candidates) if candidates else None

        victim, held = wait_for(holding, 10, "a worker holding a batch")
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        self.note(f"kill -9 worker pid {victim.pid} holding {held} ids")
        return held

    def pause(self, seconds: float) -> None:
        """Let the cluster run (a sampling period, not a wait for a condition)."""
        time.sleep(seconds)

    # -- judging ----------------------------------------------------------------------------
    def finish(self, fault: str, settle_s: float = 3.0, stuck_after_s: float = 3.0) -> Report:
        """Let things settle, measure stuck rows, stop gracefully, then judge from MySQL."""
        self.pause(settle_s)
        stuck = scalar(
            self.conn,
            "SELECT COUNT(*) FROM user_block_status WHERE next_check_at < NOW(3) - INTERVAL %s MICROSECOND",
            (round(stuck_after_s * 1e6),),
        )
        codes = self.procs.stop_all(timeout=30)
        bad = {pid: code for pid, code in codes.items() if code not in (0, -signal.SIGKILL)}
        assert not bad, f"processes exited badly: {bad}\n{self.procs.logs()}"
        violations = audit_violations(self.conn)
        lateness = scalar(
            self.conn,
            "SELECT COALESCE(MAX(TIMESTAMPDIFF(MICROSECOND, old_due, written_at)), 0) / 1e6 FROM audit "
            "WHERE new_count = old_count + 1 AND old_due >= %s",
            (self.baseline,),
        )
        broken = scalar(
            self.conn,
            "SELECT COUNT(*) FROM (SELECT old_due, "
            "LAG(new_due) OVER (PARTITION BY row_id ORDER BY written_at, old_due) AS previous "
            "FROM audit) AS chain WHERE previous IS NOT NULL AND previous <> old_due",
        )
        writes = scalar(self.conn, "SELECT COALESCE(SUM(check_count), 0) FROM user_block_status")
        invocations = sum(len(path.read_text().split()) for path in self.record.glob("*.ids"))
        return Report(
            fault=fault,
            rows=self.rows,
            writes=int(writes),
            max_lateness_s=float(lateness),
            stuck_rows=int(stuck),
            premature=violations["premature"],
            double=violations["double"],
            broken_chains=int(broken),
            invocations=invocations,
            duplicates=invocations - int(writes),
            events=self.events,
        )

    def close(self) -> None:
        self.redis.kill()
        self.mysql.kill()
