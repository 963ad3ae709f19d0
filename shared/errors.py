"""The root of recheck's own errors, and its three families.

Library code raises these and never decides the process's exit: only the command layer
(recheck/commands/launch.py) turns them into exit codes (2 for configuration, 1 otherwise).

- ConfigError (shared/config.py): a setting names something unusable; exit 2.
- OutageError: a server is away or refuses writes; callers wait and retry (DatabaseDown, in
  shared/mysql/db.py). Redis's own exceptions are caught as they are (shared/redis/connection.py's
  REDIS_DOWN): redis-py raises them from inside every command, and wrapping each call to
  translate them would cost a frame on every hot-path command.
- CheckBoundaryError: what a check gave cannot be stored (a result the column refuses, a value
  of the wrong shape): that row fails, never the worker.
Control flow that crosses modules (NotLeader, StartLater) derives from RecheckError too.
"""

from __future__ import annotations


class RecheckError(Exception):
    """Anything recheck itself raises on purpose."""


class OutageError(RecheckError):
    """A server is unreachable or refuses to write: wait and try again."""


class CheckBoundaryError(RecheckError):
    """What a check returned cannot be stored: its row fails, with this as the reason."""
