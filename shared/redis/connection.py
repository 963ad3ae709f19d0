"""Redis client construction and the errors that mean "Redis is away, retry later".

RECHECK_REDIS_URL names one Redis server, or any node of a Redis Cluster: the server itself
says which (CLUSTER SLOTS answers on a cluster node only), and a cluster gets redis-py's cluster client,
which follows MOVED/ASK redirections and rereads the slot map after a failover or a reshard.
"""

from __future__ import annotations

import time
from typing import Any

import redis
import redis.cluster
from redis.backoff import NoBackoff
from redis.exceptions import ClusterError, NoPermissionError, RedisClusterException, ResponseError
from redis.retry import Retry

from recheck.shared.config import Deployment
from recheck.shared.outage import Outage

# BusyLoadingError (a restarting Redis loading its data) and AuthenticationError are
# ConnectionError subclasses: all of them mean "wait and try again". On a cluster so do its
# transitions: CLUSTERDOWN and MASTERDOWN during a failover, TRYAGAIN during a reshard, a slot
# no live master serves yet, and redirections that did not settle within the client's retries.
REDIS_DOWN = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    ClusterError,
    RedisClusterException,
    redis.exceptions.TryAgainError,
    redis.exceptions.AskError,  # MovedError too
)

# Long enough for a blocking wait (BLPOP, at most 1 s) plus a slow Lua script; a hung server
# still surfaces as TimeoutError instead of a stuck process.
SOCKET_TIMEOUT = 15.0


# What connect_redis returns: a Client or a ClusterClient. Typed Any on purpose: redis-py types
# its replies as unions of str, bytes and Awaitable that no caller here ever sees (a plain,
# bytes-returning, synchronous client); the Store's methods are typed at their own boundary.
RedisClient = Any


class Client(redis.Redis):
    """redis-py's client, noting when a command last succeeded (see shared/outage.py)."""

    seen = 0.0  # monotonic time of the last successful command, any client of this process

    def execute_command(self, *args: Any, **options: Any) -> Any:
        result = super().execute_command(*args, **options)  # type: ignore[no-untyped-call]
        Client.seen = time.monotonic()
        return result


def last_success() -> float:
    return Client.seen


class ClusterClient(redis.cluster.RedisCluster):
    """redis-py's cluster client, noting successes like Client."""

    def execute_command(self, *args: Any, **options: Any) -> Any:
        result = super().execute_command(*args, **options)  # type: ignore[no-untyped-call]
        Client.seen = time.monotonic()
        return result


def _options(timeout: float) -> dict[str, Any]:
    return {
        "socket_timeout": timeout,
        "socket_connect_timeout": min(timeout, 5.0),
        "socket_keepalive": True,
        "health_check_interval": 30,
        "decode_responses": False,
        # No silent retries inside redis-py: a retried script whose first reply was lost would
        # run twice. Every caller handles ConnectionError itself (backoff, then resync). (The
        # cluster client still follows MOVED/ASK: a redirected command has not run.)
        "retry": Retry(NoBackoff(), 0),
    }


def is_cluster(client: redis.Redis) -> bool:
    """Whether the server is a node of a Redis Cluster (raises REDIS_DOWN if it cannot say).

    Asked with CLUSTER SLOTS, which the cluster client needs anyway, rather than INFO, which
    Redis files under @dangerous, out of a least-privilege ACL user's reach. A standalone server
    or a proxy refuses it ("cluster support disabled"): one Redis. An ACL without it: INFO may
    still say; if it cannot, one Redis, as before either was asked."""
    try:
        client.execute_command("CLUSTER", "SLOTS")  # type: ignore[no-untyped-call]
        return True
    except NoPermissionError:
        pass
    except ResponseError:
        return False
    try:
        return int(client.info("cluster").get("cluster_enabled", 0)) == 1
    except ResponseError:
        return False


def connect_redis(
    deployment: Deployment, outage: Outage | None = None, timeout: float = SOCKET_TIMEOUT
) -> RedisClient:
    """A client for RECHECK_REDIS_URL: plain, or the cluster client if the server is a cluster
    node. outage: a process starting while Redis is away waits until the server can say which,
    reporting it like any outage (one line when it goes, one when it is back); without one
    (commands), a plain client whose first command reports the outage. timeout: seconds a
    connect or a reply may take (shorter for a probe that must answer within its own bound)."""
    plain = Client.from_url(deployment.redis_url, **_options(timeout))
    while True:
        try:
            cluster = is_cluster(plain)
            break
        except REDIS_DOWN as error:
            if outage is None:
                return plain
            time.sleep(outage.failed(error))
    if outage is not None:
        outage.ok()
    if not cluster:
        return plain
    plain.close()
    return ClusterClient.from_url(deployment.redis_url, **_options(timeout))
