"""Redis client construction and the errors that mean "Redis is away, retry later"."""

from __future__ import annotations

import time

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from shared.config import Settings

# BusyLoadingError (a restarting Redis loading its data) and AuthenticationError are
# ConnectionError subclasses: all of them mean "wait and try again".
REDIS_DOWN = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)

# Long enough for a blocking BLMOVE (at most 1 s) plus a slow Lua script; a hung server
# still surfaces as TimeoutError instead of a stuck process.
SOCKET_TIMEOUT = 15.0


class Client(redis.Redis):
    """redis-py's client, noting when a command last succeeded (see shared/outage.py)."""

    seen = 0.0  # monotonic time of the last successful command, any client of this process

    def execute_command(self, *args, **options):
        result = super().execute_command(*args, **options)
        Client.seen = time.monotonic()
        return result


def last_success() -> float:
    return Client.seen


def connect_redis(settings: Settings) -> Client:
    return Client.from_url(
        settings.redis_url,
        socket_timeout=SOCKET_TIMEOUT,
        socket_connect_timeout=5.0,
        socket_keepalive=True,
        health_check_interval=30,
        decode_responses=False,
        # No silent retries inside redis-py: a retried script whose first reply was lost would
        # run twice. Every caller handles ConnectionError itself (backoff, then resync).
        retry=Retry(NoBackoff(), 0),
    )
