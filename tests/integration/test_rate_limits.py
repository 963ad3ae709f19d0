"""Rate limits over every worker (issue 25): rate_limit (checks started per second) and
max_in_flight (checks running at once), kept in Redis by the take itself (_take_grant.lua).

Real worker processes; the checks count themselves (timestamps in files, a counter in Redis),
so the figures are the provider's view, not recheck's. On the code before, each worker ran as
fast as its concurrency let it: three workers made three times the calls.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from recheck.shared.core.limits import partition_limits
from tests.support.helpers import counted_rate, make_store, query, recheck, scalar, seed_rows
from tests.support.servers import RedisCluster, wait_for

pytestmark = pytest.mark.serial  # rates and counts: serial layer (make test)
STAMPED = {"RECHECK_CHECK": "tests.support.checks:stamped"}
# Seconds measured: 5 in make test (no test sleeps longer); the figures in docs/performance.md
# are over 30 s (TEST_RATE_WINDOW=30 pytest -s tests/integration/test_rate_limits.py).
WINDOW = float(os.environ.get("TEST_RATE_WINDOW", "5"))


def stamps_of(file: Path) -> list[float]:
    """When each check of one worker process started."""
    return [float(line.split()[0]) for line in file.read_text().splitlines()]


def stamps(folder: Path) -> list[float]:
    """When each check started, over every worker process."""
    return sorted(t for f in folder.glob("*.stamps") for t in stamps_of(f))


def busiest_second(times: list[float]) -> int:
    """The most checks that started within any one second."""
    most, first = 0, 0
    for last, at in enumerate(times):
        while at - times[first] >= 1.0:
            first += 1
        most = max(most, last - first + 1)
    return most


def start_limited(procs, settings, record: Path, workers: int = 3, env: dict | None = None) -> list:
    procs.start("dispatcher", settings)
    environment = {**STAMPED, "TEST_CHECK_RECORD": str(record), **(env or {})}
    return [procs.start("worker", settings, env=environment) for _ in range(workers)]


@pytest.fixture(params=["one Redis, 1 partition", "one Redis, 3 partitions", "a Redis Cluster, 3 partitions"])
def limited_redis(request, tmp_path):
    """(redis_url or None for the test's own Redis, partitions): on a cluster each partition's
    share of the limit is kept on the master that owns its slots."""
    if "Cluster" not in request.param:
        yield None, int(request.param.split(", ")[1][0])
        return
    cluster = RedisCluster(tmp_path / "cluster", masters=3, replicas=0)
    cluster.start()
    try:
        yield f"redis://127.0.0.1:{cluster.nodes[0].port}/0", 3
    finally:
        cluster.kill()


START_JITTER_S = 0.05  # how much later than its grant a check may start (stamps are starts)


def test_three_workers_keep_to_200_checks_a_second(make_settings, procs, tmp_path, limited_redis):
    redis_url, partitions = limited_redis
    on = {"redis_url": redis_url} if redis_url else {}
    settings = make_settings(interval=3600, rate_limit=200, partitions=partitions, worker_batch=500, **on)
    record = tmp_path / "stamps"  # apart from the cluster's folders
    record.mkdir()
    seed_rows(settings, int(400 + 300 * WINDOW), due_now=True)  # more than WINDOW at 200/s: it binds
    start_limited(procs, settings, record)
    wait_for(lambda: len(stamps(record)) >= 400, 15, "the first checks")
    begin = time.time()
    time.sleep(WINDOW)
    status = recheck("status", settings=settings).stdout
    times = [t for t in stamps(record) if begin <= t < begin + WINDOW]
    rate = len(times) / WINDOW
    burst = partition_limits(200, 0, partitions)[0].burst * partitions  # one grant, all partitions
    # Each worker's share of the window (the workers start one after another: before the window,
    # the first one alone had the whole limit).
    per_worker = sorted(
        len([t for t in stamps_of(f) if begin <= t < begin + WINDOW]) for f in record.glob("*.stamps")
    )
    where = f"{'a cluster, ' if redis_url else ''}{partitions} partition(s)"
    print(f"rate_limit 200, {where}: {rate:.1f} checks/s over {WINDOW} s, busiest second "
          f"{busiest_second(times)}, per worker {per_worker}")  # fmt: skip
    # Within a few % of the limit, and never more than a token bucket allows in any window: the
    # limit's worth of the window plus one grant (2 % of a 10 s window, 4 % of a 5 s one).
    assert rate >= 200 * 0.95 and len(times) <= 200 * WINDOW + burst, (rate, len(times), burst)
    # Never above by more than a grant, give or take how late a check starts after its grant: the
    # stamps are the checks' starts, in the workers (223 against 221 on a Redis Cluster beside
    # another test on the slowest VM yet, 2026-12-01: 10 ms of such jitter is 2 checks).
    assert busiest_second(times) <= 200 * (1 + START_JITTER_S) + burst, busiest_second(times)
    # No worker starved. Not equal shares: grants go to whoever asks when tokens are due, and in
    # a 10 s window the shares were 19-43 % with one partition (the last worker started tends to
    # get most; counted over whole runs the first one's head start hid it): docs/rate-limits.md.
    assert len(per_worker) == 3 and per_worker[0] > 0.1 * sum(per_worker), per_worker
    assert "rate-limited" in status and "workers are behind" not in status, status


def start_counted(make_settings, procs, redis_server, max_in_flight: int, rows: int, sleep: float):
    """A dispatcher and per-row checks that count themselves in Redis (test:running, test:most,
    test:done): (settings, the counter's client, the workers' environment)."""
    settings = make_settings(interval=3600, max_in_flight=max_in_flight, concurrency=50, check_kind="row")
    seed_rows(settings, rows, due_now=True)
    env = {"RECHECK_CHECK": "tests.support.checks:counted_row", "TEST_CHECK_SLEEP": str(sleep),
           "TEST_REDIS_URL": redis_server.url()}  # fmt: skip
    procs.start("dispatcher", settings)
    return settings, redis_server.client(), env


def test_max_in_flight_20_over_three_workers_counted_by_the_check(make_settings, procs, redis_server):
    settings, counter, env = start_counted(make_settings, procs, redis_server, 20, rows=3000, sleep=0.2)
    for _ in range(3):
        procs.start("worker", settings, env=env)
    rate = counted_rate(counter, 6, 50.0, windows=3)
    print(f"max_in_flight 20: most at once {int(counter.get('test:most'))}, {rate:.1f} checks/s of 0.2 s")
    assert int(counter.get("test:most")) <= 20
    # The limit is shared, not starved: 100/s is what 20 slots allow (93.2/s alone on the slowest
    # VM yet, 2026-12-01). How soon a worker reuses its own room is the next test's.
    assert rate >= 50.0, rate


@pytest.mark.alone  # one process's rate against a fixed bound: 84.0/s alone, 80.4/s beside a busy core
def test_a_worker_whose_checks_end_takes_their_room_again_at_once(make_settings, procs, redis_server):
    """max_in_flight 10, one worker, checks of 0.1 s: when its own checks end it takes again at
    once, not after its 50 ms retry (ROOM_RETRY). One worker, so that no other worker's take picks
    the room up sooner and hides the wait (over three workers of 0.2 s checks the retry cost only
    76-77/s against 94-97/s, too close to tell apart on a slow VM: 83.5/s there, 2026-12-01)."""
    settings, counter, env = start_counted(make_settings, procs, redis_server, 10, rows=3000, sleep=0.1)
    procs.start("worker", settings, env=env)
    enough = 72.0
    rate = counted_rate(counter, 5, enough, windows=5)  # the best of five: a neighbour slows some
    most = int(counter.get("test:most"))
    print(f"max_in_flight 10, one worker: most at once {most}, {rate:.1f} checks/s of 0.1 s")
    assert most <= 10
    # Of the 100/s 10 slots allow, on the slowest VM yet (2026-12-01): 84.0/s alone, 80.4/s beside a
    # busy core; waiting out the retry instead, 60.9/s alone.
    assert rate >= enough, rate


def test_a_worker_killed_holding_its_share_gives_it_to_the_others(make_settings, procs, redis_server):
    settings, counter, env = start_counted(make_settings, procs, redis_server, 10, rows=2000, sleep=3)
    first = procs.start("worker", settings, env=env)
    wait_for(lambda: int(counter.get("test:running") or 0) == 10, 10, "the first worker's 10 checks")
    procs.start("worker", settings, env=env)
    time.sleep(1)
    first.send_signal(signal.SIGKILL)  # dies holding 10 running checks' worth of its share
    counter.set("test:running", 0)  # its checks died with it (they cannot count themselves down)
    counter.set("test:most", 0)
    wait_for(lambda: int(counter.get("test:running") or 0) == 10, 15, "the survivor running all 10")
    time.sleep(3)
    assert int(counter.get("test:most")) <= 10


def busiest(times: list[float], window: float) -> int:
    """The most checks that started within any `window` seconds."""
    most, first = 0, 0
    for last, at in enumerate(times):
        while at - times[first] >= window:
            first += 1
        most = max(most, last - first + 1)
    return most


def test_idle_workers_woken_together_start_no_more_than_the_limit_allows(make_settings, procs, tmp_path, sql):
    """8 workers wait, idle, in their blocking take when 300 rows fall due at once under
    rate_limit 5/s: each wait delivers an entry, and those beyond the tokens go back to the queue
    instead of being checked. (Before issue 32: 8 checks started within 0.1 s.)"""
    settings = make_settings(interval=3600, rate_limit=5)
    seed_rows(settings, 300)  # due over the next hour: nothing to do yet
    query(sql, "UPDATE user_block_status SET next_check_at = NOW(3) + INTERVAL 1 HOUR")
    start_limited(procs, settings, tmp_path, workers=8)
    wait_for(
        lambda: make_store(settings).client.scard(make_store(settings).keys.workers) == 8, 30, "8 workers"
    )
    time.sleep(1.5)  # all of them idle in their blocking take
    query(sql, "UPDATE user_block_status SET next_check_at = NOW(3) - INTERVAL 1 SECOND")
    time.sleep(4)
    times = stamps(tmp_path)
    burst = partition_limits(5, 0, 1)[0].burst
    print(f"rate_limit 5 with 8 idle workers woken: {len(times)} checks in 4 s, busiest 0.1 s "
          f"{busiest(times, 0.1)}, busiest second {busiest(times, 1.0)}")  # fmt: skip
    assert busiest(times, 0.1) <= burst + 1, times[:12]  # 5 * 0.1 + one grant (1), counted whole
    assert busiest(times, 1.0) <= 5 + burst, times[:12]
    assert len(times) >= 12  # and the limit is used: about 5 a second


def test_max_in_flight_counts_checks_that_hang_past_their_timeout(make_settings, procs, redis_server):
    """A plain per-row check, every fifth call hanging 3 s past a 0.5 s timeout: the abandoned
    threads go on calling the provider, so they count against max_in_flight until they end.
    (Before issue 32 they were no longer counted: 16 calls at once under a limit of 4.)"""
    settings, counter, env = start_counted(make_settings, procs, redis_server, 4, rows=400, sleep=0.05)
    settings = settings.evolve(check_timeout=0.5)
    env = {**env, "RECHECK_CHECK": "tests.support.checks:counted_sometimes_hanging", "TEST_CHECK_HANG": "3"}
    for _ in range(2):
        procs.start("worker", settings, env=env)
    wait_for(lambda: int(counter.get("test:done") or 0) >= 40, 40, "checks, some of them hanging")
    assert int(counter.get("test:most")) <= 4, int(counter.get("test:most"))


def test_redis_losing_its_data_starts_the_limits_over(make_settings, procs, tmp_path, redis_server):
    settings = make_settings(interval=3600, rate_limit=100)
    seed_rows(settings, 6000, due_now=True)
    start_limited(procs, settings, tmp_path, workers=2)
    wait_for(lambda: len(stamps(tmp_path)) >= 200, 15, "the first checks")
    redis_server.client().flushall()  # the bucket, the counts, the queue: gone
    lost = time.time()
    wait_for(lambda: len([t for t in stamps(tmp_path) if t > lost + 2]) >= 300, 20, "checks after the flush")
    after = [t for t in stamps(tmp_path) if t > lost + 2]
    # Give or take how late a check starts after its grant (stamps are starts: 113 against 110
    # beside another test on the slowest VM yet, 2026-12-01).
    assert busiest_second(after) <= 100 * (1 + START_JITTER_S) + partition_limits(100, 0, 1)[0].burst
    assert make_store(settings).client.exists(make_store(settings).keys.rate)  # the limit is kept again


def test_config_warns_when_the_rows_need_more_than_the_limit(make_settings, sql):
    settings = make_settings(interval=10, rate_limit=50)
    seed_rows(settings, 1000)  # 100 checks/s needed
    query(sql, "UPDATE user_block_status SET next_check_at = '9999-12-30' WHERE user_id <= 400")  # paused
    found = json.loads(recheck("config", "--json", settings=settings).stdout)
    assert any("rate_limit 50/s is below" in w and "about 60 checks/s" in w for w in found["warnings"]), found
    assert recheck("config", settings=settings).returncode == 0  # a warning, not a problem
    assert scalar(sql, "SELECT COUNT(*) FROM user_block_status") == 1000
    fine = make_settings(interval=10, rate_limit=500)
    assert json.loads(recheck("config", "--json", settings=fine).stdout)["warnings"] == []


def test_max_in_flight_must_cover_the_partitions(make_settings):
    with pytest.raises(ValueError, match="max_in_flight"):
        make_settings(max_in_flight=2, partitions=4)
