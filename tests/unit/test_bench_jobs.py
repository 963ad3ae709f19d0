"""`recheck bench`'s one-shot jobs modes: the stamps (commit -> check start, jobs handled twice)
and the targets' verdicts, from made-up figures. No servers."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.compare import main as bench_main
from bench.compare import split_cores
from bench.report import jobs_targets
from bench.runs import ALONE, BenchConfig, Result
from bench.stamps import (
    ENV,
    parse_checks,
    quantile,
    read_checks,
    read_commits,
    stamp,
    start_delays,
    write_commits,
)


def test_the_check_stamps_each_call_and_does_nothing_else(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV, str(tmp_path))
    assert stamp([3, 1, 2]) == [None, None, None]
    assert stamp([2]) == [None]
    first, calls = read_checks(tmp_path)
    assert set(first) == {1, 2, 3} and first[2] <= first[1] + 1
    assert calls == {1: 1, 2: 2, 3: 1}  # job 2: handled twice


def test_without_a_folder_the_check_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert stamp([1]) == [None]
    assert list(tmp_path.iterdir()) == []


def test_the_first_start_counts_and_every_call_is_counted():
    first, calls = parse_checks(["10.5 1 2", "10.2 2 3", "11.0 1"])
    assert first == {1: 10.5, 2: 10.2, 3: 10.2}
    assert calls == {1: 2, 2: 2, 3: 1}


def test_commits_round_trip_and_delays_cover_the_window_only(tmp_path: Path):
    write_commits(tmp_path / "commits-0.txt", [1, 2, 3, 4], [100.0, 101.0, 102.0, 109.0])
    write_commits(tmp_path / "commits-1.txt", [5], [101.5])
    commits = read_commits(tmp_path)
    assert commits == {1: 100.0, 2: 101.0, 3: 102.0, 4: 109.0, 5: 101.5}
    starts = {1: 100.25, 2: 101.05, 5: 101.5, 4: 109.5}  # 3 never started
    delays, unseen = start_delays(commits, starts, since=100.5, until=105.0)
    assert [round(d, 3) for d in delays] == [0.0, 0.05] and unseen == 1  # jobs 5, 2; 3 unseen


def test_a_quantile_among_jobs_never_started_is_none():
    values = [i / 100 for i in range(1, 101)]  # 0.01 .. 1.00
    assert quantile(values, 0.5) == 0.5
    assert quantile(values, 0.99) == 0.99  # nearest rank, no float noise (0.99 * 100)
    assert quantile(values, 0.99, unseen=1) == 1.0  # rank 100 of 101: the slowest job seen
    assert quantile(values, 0.99, unseen=2) is None  # rank 101 of 102: a job never started
    assert quantile([], 0.5) is None and quantile([], 0.5, unseen=3) is None


def config(mode: str, workers: int = 3, batch: int = 500) -> BenchConfig:
    return BenchConfig(
        mode=mode, rows=1000, workers=workers, seconds=10.0, warmup=1.0, interval=10.0, strategies=(),
        check="bench.stamps:stamp", concurrency=1, batch=batch, out=Path("."),
    )  # fmt: skip


def result(strategy: str, **figures) -> Result:
    base = dict(
        mode="jobs", rows=1000, workers=3, seconds=10.0, checks=0, checks_per_second=0.0, duplicates=0,
        lock_conflicts=0, lateness_p50_s=None, lateness_p99_s=None, lateness_max_s=None, overdue_1s_max=0,
        overdue_2s_max=0, cpu_us_per_check=None, mysql_us_per_check=None, mysql_connections_max=0,
        row_lock_waits=0, history_length_max=0, take_mean=None, cpu_seconds={},
    )  # fmt: skip
    return Result(strategy=strategy, **{**base, **figures})


def test_the_drain_target_is_judged_only_at_24_consumers_by_100():
    results = [
        result("recheck", drain_checks_per_second=80_000.0),
        result("for_update", drain_checks_per_second=1_000.0),
        result("skip_locked", drain_checks_per_second=7_000.0),
    ]
    (line,) = jobs_targets(results, config("jobs", workers=24, batch=100))
    assert "11.4x" in line and "skip_locked" in line and line.endswith("MET")
    closer = [results[0], result("skip_locked", drain_checks_per_second=9_000.0)]
    (line,) = jobs_targets(closer, config("jobs", workers=24, batch=100))
    assert "8.9x" in line and line.endswith("MISSED")
    (line,) = jobs_targets(results, config("jobs", workers=3, batch=2000))
    assert "the target is for 24 consumers x batch 100" in line


def test_the_steady_targets_need_the_p99_and_a_clean_table():
    clean = dict(inserts_per_second=2000.0, left_pending=0, dead=0, checked_twice=0, written_twice=0)
    late, tidy = jobs_targets([result("recheck", start_p99_s=0.3, **clean)], config("jobs-steady"))
    assert late.endswith("MISSED") and tidy.endswith("MET")
    fast, messy = jobs_targets([result("recheck", start_p99_s=0.05, **{**clean, "left_pending": 1})],
                               config("jobs-steady"))  # fmt: skip
    assert fast.endswith("MET") and messy.endswith("MISSED")
    (never, _) = jobs_targets([result("recheck", start_p99_s=None, **clean)], config("jobs-steady"))
    assert "never" in never and never.endswith("MISSED")


def test_the_saturated_target_compares_handled_with_inserted_alone():
    alone = result(ALONE, inserts_per_second=10_000.0)
    (line,) = jobs_targets([alone, result("recheck", checks_per_second=5_100.0, inserts_per_second=5_000.0)],
                           config("jobs-saturated"))  # fmt: skip
    assert "0.51x" in line and line.endswith("MET")
    (line,) = jobs_targets([alone, result("recheck", checks_per_second=4_000.0, inserts_per_second=9_000.0)],
                           config("jobs-saturated"))  # fmt: skip
    assert "0.40x" in line and line.endswith("MISSED")


def test_the_mysql_core_is_split_from_the_others_and_refused_when_it_cannot_be(capsys):
    """`recheck bench --private --mysql-core N`: MariaDB alone on N, the rest on the other cores;
    a core this process may not use, or the only one, is refused before anything starts."""
    assert split_cores({0, 1, 2, 3}, 2) == ({2}, {0, 1, 3})
    with pytest.raises(ValueError, match="not one this process may run on"):
        split_cores({0, 1}, 5)
    with pytest.raises(ValueError, match="no other core"):
        split_cores({0}, 0)
    assert bench_main(["--mysql-core", "0", "--mode", "poll"]) == 2  # without --private
    assert "add --private" in capsys.readouterr().err
    assert bench_main(["--private", "--mysql-core", "4096", "--mode", "poll"]) == 2
    assert "--mysql-core 4096: core 4096 is not one" in capsys.readouterr().err
