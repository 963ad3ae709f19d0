"""The peers in `recheck bench`: hand-batched and per-row Celery and RQ jobs on small tables.

Not a speed test: every row is checked exactly once, the job's read and enqueue are timed, the
JSON carries both drain rates and the CPU per check of every process, and nothing is left
behind in Redis or running.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from bench import compare
from bench.compare import BenchConfig, run_bench
from bench.peers import CELERY_KEY_PREFIX, EXTRA, PEERS, RQ_KEY_PREFIX, missing_packages

needs_peers = pytest.mark.skipif(bool(missing_packages(PEERS)), reason=f"needs the peers extra: {EXTRA}")


def drain(settings, tmp_path, strategies, rows, seconds, peer_job):
    config = BenchConfig(
        mode="drain", rows=rows, workers=2, seconds=seconds, warmup=0.0, interval=10.0, strategies=strategies,
        check="recheck.workers.demo:noop", concurrency=10, batch=500, out=tmp_path, peer_job=peer_job,
    )  # fmt: skip
    report = run_bench(settings, config, say=lambda _: None)
    (written,) = tmp_path.glob("bench-drain-*.json")
    assert json.loads(written.read_text()) == json.loads(json.dumps(report))
    return {r["strategy"]: r for r in report["results"]}


@needs_peers
@pytest.mark.serial  # per-process CPU figures, and a drain that must end within its seconds
def test_peers_check_every_row_exactly_once_and_report_both_rates(settings, tmp_path, rds):
    # The batched jobs enqueue everything before their workers take any (the default), the
    # per-row ones while their workers drain.
    batched, per_row = ("celery_batched", "rq_batched"), ("celery_per_row", "rq_per_row")
    # A drain stops once every row is checked, so its seconds are only a ceiling: a generous one,
    # as a busy runner's workers take longer to start and to drain (one serial run failed here).
    results = drain(settings, tmp_path / "batched", batched, rows=3000, seconds=20.0, peer_job="first")
    results |= drain(settings, tmp_path / "per_row", per_row, rows=200, seconds=20.0, peer_job="overlap")
    assert list(results) == ["celery_batched", "rq_batched", "celery_per_row", "rq_per_row"]
    for strategy, result in results.items():
        name = f"{strategy}: {json.dumps({k: v for k, v in result.items() if k != 'series'})}"  # on failure
        rows = 3000 if strategy.endswith("batched") else 200
        # COUNT(check_count > 0) = SUM(check_count) = rows: every row checked, none twice.
        assert (result["drained_rows"], result["repeated_checks"]) == (rows, 0), name
        assert 0 < result["checks"] <= rows, name  # the sampler's count (Handler_update), in its window
        assert result["read_seconds"] >= 0 and result["enqueue_seconds"] > 0, name
        assert 0 < result["with_enqueue_checks_per_second"] <= result["drain_checks_per_second"], name
        if strategy in batched:  # held until every id was enqueued: the drain came after the job
            job_seconds = result["read_seconds"] + result["enqueue_seconds"]
            drain_seconds = rows / result["drain_checks_per_second"]
            assert rows / result["with_enqueue_checks_per_second"] >= drain_seconds + job_seconds - 0.02, name
        cpu = result["drain_cpu_us_per_check"]
        assert {"workers", "enqueuer", "mariadbd", "redis-server", "all"} <= cpu.keys(), name
        assert cpu["workers"] > 0 and cpu["mariadbd"] > 0, name
    assert not list(rds.scan_iter(match=f"{CELERY_KEY_PREFIX}*"))
    assert not list(rds.scan_iter(match=f"{RQ_KEY_PREFIX}:*"))
    running = subprocess.run(["pgrep", "-f", "bench[.-]peers"], capture_output=True, text=True).stdout
    assert running == "", f"peer processes still running: {running}"


def test_peers_are_drain_only_and_name_their_extra(monkeypatch, capsys):
    assert compare.main(["--mode", "steady", "--strategies", "recheck,celery_batched"]) == 2
    assert "celery_batched are measured in drain mode" in capsys.readouterr().err
    monkeypatch.setattr(compare, "missing_packages", lambda strategies: ["rq"])
    assert compare.main(["--strategies", "recheck,rq_batched"]) == 2
    assert "pip install -e '.[peers]'" in capsys.readouterr().err
