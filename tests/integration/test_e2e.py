"""The whole pipeline as separate processes, exactly as compose runs it."""

from __future__ import annotations

import time

import pytest

from tests.support.helpers import audit_violations, install_audit, query, scalar, seed_rows

ROWS = 8_000
OVERDUE_1S = "SELECT COUNT(*) FROM user_block_status WHERE next_check_at < NOW(3) - INTERVAL 1 SECOND"
OLDEST = (
    "SELECT GREATEST(TIMESTAMPDIFF(MICROSECOND, MIN(next_check_at), NOW(3)) / 1e6, 0) FROM user_block_status"
)


@pytest.mark.serial  # timing: serial layer (make test)
def test_8000_rows_every_2s_with_3_workers_stay_fresh(settings, sql, procs):
    # "While workers keep up": 4,000 checks/s, under half of what this 2-core machine's 3 workers
    # did on 2026-11-26 (about 9,800/s). 16,000 rows every 2 s (80 % of that) passed on a quiet
    # machine but not in a CI run with neighbours (2026-11-28: worst lateness 2.7 s); the rate
    # workers reach is a benchmark's figure (docs/performance.md), not this test's.
    assert settings.interval == 2.0
    install_audit(sql, settings)
    seed_rows(settings, ROWS)  # due times spread over one interval
    dispatcher = procs.start("dispatcher", settings)
    workers = [procs.start("worker", settings) for _ in range(3)]
    for process in (dispatcher, *workers):  # up first: on a loaded machine that alone takes seconds
        procs.wait_started(process)
    started = time.monotonic()
    samples = []  # (seconds since start, rows overdue by > 1 s, oldest lateness in s)
    while (elapsed := time.monotonic() - started) < 10:
        samples.append((elapsed, scalar(sql, OVERDUE_1S), float(scalar(sql, OLDEST))))
        time.sleep(0.25)  # sampling period, not a wait for a condition
    codes = procs.stop_all()
    assert set(codes.values()) == {0}, procs.logs()

    after_warmup = [s for s in samples if s[0] > 3]
    worst_lateness = max(s[2] for s in after_warmup)
    print(f"e2e: worst oldest-lateness after warm-up {worst_lateness:.3f} s over {len(after_warmup)} samples")
    assert worst_lateness < 1.0, samples
    assert max(s[1] for s in after_warmup) == 0, samples

    counts = [row[0] for row in query(sql, "SELECT check_count FROM user_block_status")]
    assert len(counts) == ROWS
    # About 4.5 cycles of 2 s fit in 10 s after the processes' start; every single row had 3 or more.
    assert min(counts) >= 3, min(counts)
    violations = audit_violations(sql)
    assert violations["premature"] == 0 and violations["double"] == 0, violations
    assert violations["writes"] == sum(counts)
    assert all(w.returncode == 0 for w in workers)
