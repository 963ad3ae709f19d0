"""`recheck health`: exit 0 if this container's recheck processes are alive and heartbeating
(the compose health check; shared/process/health.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from recheck.commands.base import Command
from recheck.shared.config import Settings
from recheck.shared.process.health import check_all
from recheck.shared.redis.connection import connect_redis

# Each Redis reply within this: a probe must answer before its engine's own bound (5 s in the
# shipped compose and Kubernetes probes), and not every engine stops a probe that runs over: an
# unreachable or stalled Redis is then "unhealthy" with the reason, not a hang.
PROBE_TIMEOUT_S = 2.0


def run(settings: Settings, _args: argparse.Namespace) -> int:
    deployment = settings.deployment()
    if not deployment.health_file:
        print("recheck health: RECHECK_HEALTH_FILE is not set (the image sets it)", file=sys.stderr)
        return 2
    results = check_all(Path(deployment.health_file), connect_redis(deployment, timeout=PROBE_TIMEOUT_S))
    for healthy, why in results:
        print(f"{'healthy' if healthy else 'unhealthy'}: {why}")
    return 0 if all(healthy for healthy, _ in results) else 1


COMMANDS = [
    Command("health", "exit 0 if this container's recheck processes are alive and heartbeating",
            "RECHECK_HEALTH_FILE, RECHECK_REDIS_URL", run),
]  # fmt: skip
