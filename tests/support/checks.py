"""Check plug-ins used by the tests (RECHECK_CHECK=tests.support.checks:NAME).

Their behaviour is steered by environment variables so that worker subprocesses started by
the tests can be told to be slow, to fail, or to die.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
import time
from pathlib import Path

from recheck import Recheck, per_row

SLEEP = float(os.environ.get("TEST_CHECK_SLEEP", "0"))
ROW_COST = float(os.environ.get("TEST_CHECK_ROW_COST", "0"))
RECORD = os.environ.get("TEST_CHECK_RECORD")  # a directory: each process appends the ids it checked
POISON = {int(x) for x in os.environ.get("TEST_CHECK_POISON", "").split(",") if x}


def _record(ids) -> None:
    if RECORD:
        with open(Path(RECORD) / f"{os.getpid()}.ids", "a") as out:
            out.write("".join(f"{i}\n" for i in ids))


def ok(ids: list[int]) -> list[str]:
    _record(ids)
    return ["ok"] * len(ids)


def slow(ids: list[int]) -> list[str]:
    """Sleeps TEST_CHECK_SLEEP seconds per batch: long enough to be caught mid-batch.

    Records the ids when it starts: a check killed halfway has still run (and may have had
    side effects), so it counts as an invocation.
    """
    _record(ids)
    time.sleep(SLEEP)
    return ["ok"] * len(ids)


def row_cost(ids: list[int]) -> list[str]:
    """Costs TEST_CHECK_ROW_COST seconds per id (a batch of 200 at 1 ms: 0.2 s). Records at start."""
    _record(ids)
    time.sleep(ROW_COST * len(ids))
    return ["ok"] * len(ids)


async def slow_row(row_id: int) -> str:
    await asyncio.sleep(SLEEP)
    _record([row_id])
    return f"ok {row_id}"


@per_row
def slow_row_sync(row_id: int) -> str:
    time.sleep(SLEEP)
    return f"sync {row_id}"


def odd_fails(ids: list[int]) -> list:
    """Even ids succeed; odd ids fail with an exception returned in the list."""
    return ["even" if i % 2 == 0 else ValueError(f"odd id {i}") for i in ids]


async def raises_for_odd(row_id: int) -> str:
    if row_id % 2:
        raise ConnectionError(f"cannot reach {row_id}")
    return "reachable"


def always_raises(ids: list[int]) -> list[str]:
    raise RuntimeError("upstream is down")


def wrong_count(ids: list[int]) -> list[str]:
    return ["ok"] * (len(ids) - 1)


def not_a_list(ids: list[int]) -> str:
    return "ok"


def hangs(ids: list[int]) -> list[str]:
    time.sleep(3600)
    return ["never"] * len(ids)


HANGING_WITH_3 = threading.Event()  # set once hangs_with_3 hangs (a test acts on it then)


def hangs_with_3(ids: list[int]) -> list[str]:
    """Hangs on any batch holding id 3 (a take cut into slices: one of them hangs)."""
    if 3 in ids:
        HANGING_WITH_3.set()
        time.sleep(3600)
    return ["reachable"] * len(ids)


def poison(ids: list[int]) -> list[str]:
    """Kills its own process when it meets a poison id, as a segfaulting extension would."""
    if POISON.intersection(ids):
        os._exit(99)
    time.sleep(SLEEP)
    return ["ok"] * len(ids)


def long_text(ids: list[int]) -> list[str]:
    return ["x" * 5000] * len(ids)


async def odd_rows_hang(row_id: int) -> str:
    """Even ids finish at once, odd ids take TEST_CHECK_SLEEP seconds."""
    if row_id % 2:
        await asyncio.sleep(SLEEP)
    return "done"


@per_row
def first_two_hang_sync(row_id: int) -> str:
    """Rows 1 and 2 block their thread for TEST_CHECK_SLEEP seconds; the others finish at once."""
    if row_id in (1, 2):
        time.sleep(SLEEP)
    return "done"


def echo(ids: list) -> list[str]:
    """Each row's result says what the check was given: its key's type and value."""
    return [f"{type(i).__name__}:{i!r}" for i in ids]


async def async_ok(row_id) -> str:
    """A per-row check that waits a little, like an HTTP call."""
    _record([row_id])
    await asyncio.sleep(0.005)
    return "up"


def recheck_by_key(ids: list[bytes]) -> list:
    """Decides each row's next due time itself: binary keys ending in an even byte after 1 s,
    odd ones after 2 s."""
    _record(ids)
    return [Recheck("seen", after=1 if key[-1] % 2 == 0 else 2) for key in ids]


def sleepy_batch(ids: list) -> list[str]:
    """10 ms per batch whatever its size: a worker's time is the thing being shared."""
    time.sleep(0.01)
    return ["ok"] * len(ids)


def exits_for_some(ids: list[int]) -> list[str]:
    """A batch check that, like a library's usage error, calls sys.exit(2) when its batch holds
    id 5, and raises KeyboardInterrupt when it holds id 6 (the whole call fails either way)."""
    _record(ids)
    if 5 in ids:
        sys.exit(2)
    if 6 in ids:
        raise KeyboardInterrupt
    return ["ok"] * len(ids)


@per_row
def row_exits(row_id: int) -> str:
    """A per-row check (in a thread) whose row 7 calls sys.exit(2), 8 raises KeyboardInterrupt
    and 9 GeneratorExit: each only its own row's failure."""
    _record([row_id])
    if row_id == 7:
        sys.exit(2)
    if row_id == 8:
        raise KeyboardInterrupt
    if row_id == 9:
        raise GeneratorExit
    return "ok"


async def async_row_exits(row_id: int) -> str:
    """The same from an async check: 7 sys.exit(2), 8 KeyboardInterrupt, 9 CancelledError."""
    _record([row_id])
    if row_id == 7:
        sys.exit(2)
    if row_id == 8:
        raise KeyboardInterrupt
    if row_id == 9:
        raise asyncio.CancelledError
    return "ok"


@per_row
def dies_with_2_once(row_id: int) -> str:
    """Row 13 ends its worker process with exit code 2 the first time (os._exit: nothing can
    catch it), as a library's C code or a stray thread might; after that it is an ordinary row."""
    _record([row_id])
    if row_id == 13 and RECORD:
        marker = Path(RECORD) / "died-once"
        if not marker.exists():
            marker.touch()
            os._exit(2)
    if row_id == 14:
        sys.exit(2)  # contained: only this row fails
    return "ok"


def token(ids: list) -> list[str]:
    """Stores the check's own setting PROBE_TOKEN (from the environment, e.g. a .env file)."""
    return [os.environ.get("PROBE_TOKEN", "missing")] * len(ids)


@per_row
def url_state(row) -> str:
    """An uptime monitor's check on its row's url (workloads with columns = "url"): 'up' or
    'down' as the url says, a failure for a url that says 'fail'. Sleeps TEST_CHECK_SLEEP."""
    _record([row["id"]])
    time.sleep(SLEEP)
    if "fail" in row["url"]:
        raise RuntimeError(f"{row['url']} does not answer")
    return "up" if "up" in row["url"] else "down"


def stamped(ids: list) -> list[str]:
    """Records "unix-time id" for each id when the call starts (rate-limit tests count them)."""
    if RECORD:
        now = time.time()
        with open(Path(RECORD) / f"{os.getpid()}.stamps", "a") as out:
            out.write("".join(f"{now:.4f} {i}\n" for i in ids))
    return ["ok"] * len(ids)


def flaky_provider(ids: list) -> list[str]:
    """stamped, and fails (raises) while the file TEST_PROVIDER_DOWN exists: a provider answering
    500 to everything (the backoff tests)."""
    stamped(ids)
    if Path(os.environ["TEST_PROVIDER_DOWN"]).exists():
        raise RuntimeError("provider answered 500")
    return ["ok"] * len(ids)


def one_group_down(ids: list) -> list:
    """stamped; while the file TEST_PROVIDER_DOWN exists, the ids up to TEST_DOWN_UP_TO fail (one
    merchant's endpoint answering 500), the others succeed (the breaker tests)."""
    stamped(ids)
    if not Path(os.environ["TEST_PROVIDER_DOWN"]).exists():
        return ["ok"] * len(ids)
    down = int(os.environ["TEST_DOWN_UP_TO"])
    return [RuntimeError("merchant answered 500") if int(i) <= down else "ok" for i in ids]


async def merchant_latency(row_id) -> str:
    """stamped; the ids up to TEST_SLOW_UP_TO answer in 2 s (a slow merchant), the others in
    10 ms (the group in-flight measurement, docs/groups.md)."""
    stamped([row_id])
    await asyncio.sleep(2.0 if int(row_id) <= int(os.environ.get("TEST_SLOW_UP_TO", "0")) else 0.01)
    return "ok"


_COUNT_UP = """
local running = redis.call('INCR', KEYS[1])
if running > tonumber(redis.call('GET', KEYS[2]) or 0) then redis.call('SET', KEYS[2], running) end
return running
"""


@per_row
def counted_row(row_id) -> str:
    """Counts itself running, over every worker process, in the tests' Redis (TEST_REDIS_URL:
    keys test:running and test:most), for TEST_CHECK_SLEEP seconds; stamps its start as stamped
    does when TEST_CHECK_RECORD is set."""
    import redis

    stamped([row_id])
    client = redis.Redis.from_url(os.environ["TEST_REDIS_URL"])
    client.eval(_COUNT_UP, 2, "test:running", "test:most")
    try:
        time.sleep(SLEEP)
    finally:
        client.decr("test:running")
        client.incr("test:done")
    return "ok"


@per_row
def counted_sometimes_hanging(row_id) -> str:
    """counted_row, but every fifth row hangs TEST_CHECK_HANG seconds (past the check timeout: a
    provider that stops answering for some calls). Its thread goes on calling, and counting."""
    import redis

    client = redis.Redis.from_url(os.environ["TEST_REDIS_URL"])
    client.eval(_COUNT_UP, 2, "test:running", "test:most")
    try:
        time.sleep(float(os.environ.get("TEST_CHECK_HANG", "3")) if int(row_id) % 5 == 0 else SLEEP)
    finally:
        client.decr("test:running")
        client.incr("test:done")
    return "ok"


CHATTY = logging.getLogger("chatty_http_client")  # a library that logs every request at INFO


async def chatty(row_id) -> str:
    CHATTY.info("GET http://target/%s 200 OK", row_id)
    if row_id == 1:
        CHATTY.warning("chatty warning for row %s", row_id)
    return "up"


async def sleeps_until_cancelled(row_id) -> str:
    """A per-row check that takes TEST_CHECK_SLEEP seconds (30 if unset): notes "time started id"
    when it starts and "time cancelled id" if its task is cancelled (recheck cancel)."""

    def note(what: str) -> None:
        if RECORD:
            with open(Path(RECORD) / f"{os.getpid()}.events", "a") as out:
                out.write(f"{time.time():.4f} {what} {row_id}\n")

    note("started")
    try:
        await asyncio.sleep(SLEEP or 30)
    except asyncio.CancelledError:
        note("cancelled")
        raise
    return "ok"


def stamped_jobs(rows: list) -> list[str]:
    """A batch check of one-shot rows with `columns` job_key and payload: notes "time job_key
    payload" for each row when the call starts (the unique jobs test reads them)."""
    if RECORD:
        now = time.time()
        with open(Path(RECORD) / f"{os.getpid()}.jobs", "a") as out:
            out.write("".join(f"{now:.4f} {row['job_key']} {row['payload']}\n" for row in rows))
    return ["done"] * len(rows)
