"""`recheck bench` end to end on small tables: real processes, real servers, real figures.

Not a speed test (figures on a shared CI machine mean nothing); it checks that every strategy
runs and is measured, and that the poll mode reads one index page per poll at two sizes.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import pytest
from redis import Redis

from bench.compare import ALL_STRATEGIES, BenchConfig, bench, run_bench
from bench.pollcost import run_poll_bench
from bench.rediscost import groupab
from bench.rediscost.groupcost import run_group_bench, settle
from bench.rediscost.scriptcost import run_script_bench
from bench.strategies import FLOOR, floor_slice
from recheck.shared.redis.scripts import script_source
from tests.support.helpers import REPO
from tests.support.servers import RedisServer


@pytest.mark.serial  # per-process CPU figures: once 0 for mariadbd beside 3 other test sessions
def test_every_strategy_drains_and_is_measured(settings, tmp_path):
    said = []
    config = BenchConfig(
        mode="drain", rows=20_000, workers=2, seconds=4.0, warmup=0.0, interval=10.0,
        strategies=(FLOOR, *ALL_STRATEGIES), check="recheck.workers.demo:noop", concurrency=10, batch=200,
        out=tmp_path,
    )  # fmt: skip
    report = run_bench(settings, config, say=said.append)
    results = {r["strategy"]: r for r in report["results"]}
    assert list(results) == [FLOOR, *ALL_STRATEGIES]
    for name, result in results.items():
        assert result["checks"] > 0, name
        assert result["duplicates"] == 0, name
        assert result["cpu_seconds"]["mariadbd"] > 0, name
        assert result["cpu_us_per_check"] > 0, name
        assert 0 < result["mysql_us_per_check"] <= result["cpu_us_per_check"], name
        # After the drain, the table's own account: rows / first to last checked_at, none twice.
        assert result["drain_checks_per_second"] > 0 and result["repeated_checks"] == 0, name
        assert 0 < result["drained_rows"] <= 20_000 and result["drain_cpu_us_per_check"]["all"] > 0, name
    assert "dispatcher" in results["recheck"]["cpu_seconds"]  # the dispatcher's CPU is counted too
    assert 40 < report["redis_bytes_per_queued_id"] < 300
    (written,) = tmp_path.glob("bench-drain-*.json")
    assert json.loads(written.read_text())["results"][1]["strategy"] == "recheck"
    table = "\n".join(said)
    assert "vs best seed" in table and "last_insert_id" in table
    assert "MySQL/floor" in table and "1.00x" in table  # the floor against itself
    assert "CPU us per check of the workers, recheck: " in table  # issue 50's moderate-rate figure


def test_floor_slices_cover_every_id_once():
    for rows, slices in ((10, 3), (20_000, 2), (7, 7), (1_000_000, 24)):
        bounds = [floor_slice(rows, i, slices) for i in range(slices)]
        ids = [i for first, last in bounds for i in range(first, last + 1)]
        assert ids == list(range(1, rows + 1))


def test_consumers_hold_connections_and_per_row_checks_run_in_every_strategy(settings, tmp_path):
    """--consumers 6 over 2 processes: 3 claiming threads each, one MySQL connection each, holding
    their claim while a 50 ms per-row check runs; recheck runs the same check 3 at a time."""
    config = BenchConfig(
        mode="drain", rows=3000, workers=2, seconds=4.0, warmup=0.0, interval=10.0,
        strategies=("skip_locked", "recheck"), check="recheck.workers.demo:sleepy", concurrency=1, batch=1,
        out=tmp_path, consumers=6,
    )  # fmt: skip
    results = {r["strategy"]: r for r in run_bench(settings, config, say=lambda _: None)["results"]}
    for name, result in results.items():
        assert result["checks"] > 0 and result["duplicates"] == 0, name
        assert {"mysql_connections_max", "row_lock_waits", "history_length_max"} <= result.keys(), name
    # 6 consumers at 20 checks/s each at the very most (a 50 ms check, one row at a time).
    assert results["skip_locked"]["checks_per_second"] <= 6 * 20 * 1.1
    assert results["skip_locked"]["mysql_connections_max"] >= 6


@pytest.mark.serial  # a lateness bound: serial layer (make test)
def test_steady_mode_reports_lateness(settings, tmp_path):
    config = BenchConfig(
        mode="steady", rows=2000, workers=1, seconds=3.0, warmup=2.0, interval=1.0,
        strategies=("recheck",), check="recheck.workers.demo:noop", concurrency=10, batch=200, out=tmp_path,
    )  # fmt: skip
    (result,) = run_bench(settings, config, say=lambda _: None)["results"]
    assert result["checks"] > 2000  # every row about once a second for 3 s
    assert 0 < result["lateness_p50_s"] <= result["lateness_p99_s"] <= result["lateness_max_s"] < 2.0


def test_a_poll_reads_one_page_at_each_size(settings, tmp_path):
    results = run_poll_bench(settings, [10_000, 30_000], polls=3, out=tmp_path, say=lambda _: None)
    assert [r.rows for r in results] == [10_000, 30_000]
    for result in results:
        assert result.ids_per_poll == settings.dispatch_batch
        assert settings.dispatch_batch <= result.index_rows_read <= settings.dispatch_batch + 2


def test_the_group_bench_takes_whole_batches_and_measures_the_group_state_floor(settings, tmp_path):
    said: list[str] = []
    # 60,000 ids: at 1.7-3.5 us an id their push costs Redis 100-210 ms, many times the 10 ms
    # tick its CPU time is counted in (6,000 cost 10-21 ms, which read as 0 ticks now and then)
    results = run_group_bench(
        settings, [10, 3000], rows=60_000, takes=40, batch=100, out=tmp_path, say=said.append
    )
    assert [r.groups for r in results] == [10, 3000]
    for result in results:
        assert result.ids_per_take == 100  # every take whole: the limits are set never to bind
        assert min(result.redis_cpu_ms, result.group_state_ms, result.one_zset_ms) >= 0  # Redis is local
        assert result.push_us > 0  # 60,000 ids pushed through dispatch.lua cost Redis some CPU
    (written,) = tmp_path.glob("bench-groups-*.json")
    assert "group_state_ms" in json.loads(written.read_text())["results"][0]
    printed = "\n".join(said)
    assert "group state" in printed and "one zset" in printed and "one thread" in printed
    client = Redis.from_url(settings.deployment.redis_url)
    assert not client.keys("{bench-*") and not client.keys("bench*")  # nothing left behind


def test_the_script_bench_moves_every_id_through_the_three_scripts_and_leaves_nothing(settings, tmp_path):
    said: list[str] = []
    small = settings.evolve(high_water=1500, dispatch_batch=500)  # pushes between takes, as a drain
    results = run_script_bench(small, rows=6000, rounds=2, batch=400, out=tmp_path, say=said.append)
    costs = {r.script: r for r in results}
    assert list(costs) == ["dispatch", "take", "ack", "all three"]
    for cost in results:
        assert 0 < cost.us_per_id_least <= cost.us_per_id_median, cost  # Redis counted each script
    (written,) = tmp_path.glob("bench-scripts-*.json")
    per_round = json.loads(written.read_text())["per_round"]
    assert all(len(values) == 2 for values in per_round.values())
    assert "all three" in "\n".join(said)
    client = Redis.from_url(settings.deployment.redis_url)
    assert not client.keys("*bench-scripts*")  # nothing left behind


def test_the_script_bench_says_when_other_clients_ran_scripts_meanwhile(settings, tmp_path):
    """INFO commandstats counts every client's scripts: on a shared Redis the figures include
    theirs, and the bench must say so rather than print them as its own."""
    client = Redis.from_url(settings.deployment.redis_url)
    other = client.register_script("return 1")
    done = threading.Event()

    def neighbour() -> None:
        while not done.is_set():
            other()

    thread = threading.Thread(target=neighbour)
    thread.start()
    said: list[str] = []
    try:
        run_script_bench(settings, rows=3000, rounds=1, batch=500, out=tmp_path, say=said.append)
    finally:
        done.set()
        thread.join()
    (written,) = tmp_path.glob("bench-scripts-*.json")
    assert json.loads(written.read_text())["foreign_calls"] > 0
    assert any("other clients ran" in line for line in said), said


def test_private_servers_are_stopped_and_their_data_removed(settings, tmp_path, monkeypatch):
    """`--private` servers hold over a gigabyte of data files each run: nothing may stay behind."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    config = BenchConfig(
        mode="poll", rows=0, workers=1, seconds=1.0, warmup=0.0, interval=10.0,
        strategies=("recheck",), check="recheck.workers.demo:noop", concurrency=1, batch=100, out=tmp_path,
    )  # fmt: skip
    assert bench(settings, config, sizes=[5_000], polls=2, private=True) == 0
    assert list(scratch.iterdir()) == [], "the private servers' folder is left behind"
    running = subprocess.run(["pgrep", "-f", str(scratch)], capture_output=True, text=True).stdout
    assert running == "", f"private servers still running: {running}"


@pytest.mark.parametrize(
    "mode, started",
    [
        (["--mode", "poll", "--sizes", "5000000", "--polls", "5"], "private servers:"),
        # a drain also has its processes' log folder (kept only when one of them exits badly)
        (
            ["--mode", "drain", "--rows", "20000", "--strategies", "recheck", "--seconds", "60"],
            "recheck: drain",
        ),
    ],
    ids=["poll", "drain"],
)
def test_sigterm_stops_a_benchmark_with_its_private_servers_and_removes_their_data(tmp_path, mode, started):
    """`timeout`, `kill` or a cancelled CI job end a benchmark with SIGTERM: its default action
    ended the process on the spot and left the private servers' gigabyte of data behind (and a
    drain's log folder)."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    command = [sys.executable, "-m", "bench", "--private", *mode, "--out", str(tmp_path / "out")]
    bench_run = subprocess.Popen(
        command, cwd=REPO, env={**os.environ, "TMPDIR": str(scratch)}, stdout=subprocess.PIPE, text=True
    )
    try:
        for line in bench_run.stdout or ():
            if line.startswith(started):  # the servers up (a drain: its processes starting)
                break
        assert list(scratch.glob("recheck-servers-*")), "the private servers' folder"
        if mode[1] == "drain":
            assert list(scratch.glob("recheck-bench-*")), "the drain's log folder"
        bench_run.send_signal(signal.SIGTERM)
        assert bench_run.wait(timeout=120) != 0
    finally:
        bench_run.kill()
    assert list(scratch.glob("recheck-servers-*")) == [], "the private servers' folder is left behind"
    assert list(scratch.glob("recheck-bench-*")) == [], "the processes' log folder is left behind"
    running = subprocess.run(["pgrep", "-f", str(scratch)], capture_output=True, text=True).stdout
    assert running == "", f"private servers still running: {running}"


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the dropped one, on purpose
def test_a_sigterm_that_lands_in_a_del_still_stops_the_benchmark():
    """A fresh-clone CI run: the KeyboardInterrupt of a SIGTERM was raised while the interpreter
    ran a Redis client's __del__ ('Exception ignored in: Redis.__del__'), so it was dropped and the
    benchmark ran on to exit 0. The interrupt is raised again until the benchmark stops, also in a
    benchmark started in the background (`&`), where SIGINT is ignored from the start: raised
    again as a simulated SIGINT, it was lost there too (a CI run beside a CPU hog, its jobs started
    with `&`: DID NOT RAISE)."""
    from bench.compare import hold_interrupts_now, stop_on_sigterm

    class SignalledWhileCollected:
        def __del__(self):
            signal.raise_signal(signal.SIGTERM)  # its handler runs here, at once: the exception is dropped

    restore = stop_on_sigterm()
    sigint = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as in a job started with `&`
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            SignalledWhileCollected()  # collected at once
            while time.monotonic() - started < 5:
                time.sleep(0.05)
        assert time.monotonic() - started < 2  # interrupted again within a second
    finally:
        hold_interrupts_now()()
        restore()
        signal.signal(signal.SIGINT, sigint)


def test_settle_finishes_the_rehashing_a_bulk_write_leaves_and_changes_nothing(tmp_path):
    """A hash or sorted set of 70,000 written at once is left rehashing (its table doubled at
    65,536), which slows reads in it; groupab settles its big keys before it times anything."""
    server = RedisServer(tmp_path / "redis", extra=("--enable-debug-command", "local"))
    server.start()
    try:
        client = server.client()
        client.hset("h", mapping={str(i): "1" for i in range(70_000)})
        client.zadd("z", {str(i): i for i in range(70_000)})

        def rehashing(key: str) -> bool:
            return "rehashing target" in client.execute_command("DEBUG", "HTSTATS-KEY", key).decode()

        assert rehashing("h") and rehashing("z")
        assert settle(client, ["h", "z", "missing"]) == 140_000
        assert not rehashing("h") and not rehashing("z")
        assert client.hlen("h") == 70_000 and client.zcard("z") == 70_000 and client.dbsize() == 2
    finally:
        server.stop()


def test_the_group_ab_bench_times_each_versions_pushes_takes_and_acks_apart(settings, tmp_path):
    lua = REPO / "shared" / "redis" / "lua"
    before, after, same = tmp_path / "before", tmp_path / "after", tmp_path / "same"
    for folder in (before, after, same):
        shutil.copytree(lua, folder)
    for part in ("_take_groups.lua", "_group_release.lua"):  # another take and another ack script
        (after / part).write_text((after / part).read_text() + "-- after\n")
    times = groupab.run(before, after, groups=50, pairs=6, rows=8000, redis_url=settings.deployment.redis_url)
    timed = (before, after, groupab.FLOOR)  # the floor beside the versions, its push, take and ack apart
    assert sorted(times) == sorted((v, s) for v in timed for s in ("dispatch", "take_grouped", "ack"))
    assert all(len(calls) == 6 and min(calls) > 0 for calls in times.values()), times
    assert "-- after" not in script_source("take_grouped")  # the package's own scripts read again
    with pytest.raises(SystemExit, match="the same scripts"):
        groupab.run(before, same, groups=50, pairs=1, rows=3000, redis_url=settings.deployment.redis_url)
    client = Redis.from_url(settings.deployment.redis_url)
    assert not client.keys("*bench*")  # nothing left behind


def test_the_floors_push_serves_groups_in_turn_and_a_returning_group_waits_for_the_next_turn(settings):
    """groupab's floor claims fair turns: a group's entries one per round of the groups, in its
    order, and a group pushed while the take is past its turns joins at the turn reached (not
    ahead of the others, not behind another group's backlog)."""
    client = Redis.from_url(settings.deployment.redis_url)
    keys = [f"{{test-floor}}:{name}" for name in groupab.Floor.KEYS]
    client.delete(*keys)
    script = client.register_script(groupab.FLOOR.read_text())

    def push(*entries: str) -> int:
        return script(keys=keys, args=["push", 1000, *entries])

    def take(n: int) -> list[bytes]:
        return script(keys=keys, args=["take", n])

    try:
        assert push("1:5:a", "2:5:a", "3:5:a", "4:5:a", "5:5:a", "6:5:b") == 6
        assert push("1:5:a", "7:5:c") == 1  # id 1 in flight: the dedup leaves it out
        assert sorted(take(3)) == [b"1:5:a", b"6:5:b", b"7:5:c"]  # turn 0: one entry of each group
        assert take(2) == [b"2:5:a", b"3:5:a"]  # turns 1 and 2: only a waits
        assert push("8:5:b", "9:5:b") == 2  # the take has reached turn 3: b's entries from there
        later = take(4)  # (within a turn, the groups in no promised order)
        assert sorted(later[:2]) == [b"4:5:a", b"8:5:b"] and sorted(later[2:]) == [b"5:5:a", b"9:5:b"]
        assert script(keys=keys, args=["ack", b"1:5:a", b"2:5:a", b"99:5:a"]) == 2  # 99 never in flight
    finally:
        client.delete(*keys)
