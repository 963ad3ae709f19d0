"""Redis client construction and the errors that mean "Redis is away, retry later"."""

from __future__ import annotations

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


def connect_redis(settings: Settings) -> redis.Redis:
    return redis.Redis.from_url(
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
