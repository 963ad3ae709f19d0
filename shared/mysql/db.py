"""MySQL connections, and what each server error means for the caller.

- Lost connections become DatabaseDown, and refusals to write (a read-only server during a
  failover) DatabaseRefused, a kind of DatabaseDown: every loop waits them out alike, with one
  log line and backoff, never a crash.
- Deadlocks are retried; a lock wait timeout (the application holds a row recheck wants to write)
  is the caller's to handle (see workers/writing/writeback.py): recheck's sessions wait at most
  LOCK_WAIT_SECONDS for a row lock instead of the server's default 50 s.
- Data errors (a value a column refuses) are the caller's too: they belong to one row.
"""

from __future__ import annotations

import contextlib
import logging
import ssl
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar, TypeVar

import pymysql

from recheck.shared.config import Workload
from recheck.shared.errors import OutageError

log = logging.getLogger(__name__)
T = TypeVar("T")

# Client and server error codes meaning "the connection is gone or unusable; reconnect".
CONNECTION_LOST = {
    1040,  # too many connections
    1053,  # server shutdown in progress
    1927,  # MariaDB: connection was killed
    2003,  # can't connect
    2006,  # server has gone away
    2013,  # lost connection during query
    2014,  # commands out of sync (a half-read result after an interrupted call)
    2055,  # lost connection (SSL / system error)
    4031,  # MySQL 8: disconnected by the server because of inactivity
}
# The server is up but will not write: wait, and reconnect (DNS may point at a new primary).
REFUSING = {
    1290,  # --read-only / super_read_only (both servers)
    1836,  # MySQL: running in read-only mode
    1792,  # cannot execute statement in a READ ONLY transaction
    1223,  # FLUSH TABLES WITH READ LOCK is in force
}
DEADLOCK = 1213
LOCK_WAIT_TIMEOUT = 1205
LOCK_NOWAIT = 3572  # MySQL: a NOWAIT locking read met a lock (MariaDB answers LOCK_WAIT_TIMEOUT)
LOCKED_NOWAIT = {LOCK_NOWAIT, LOCK_WAIT_TIMEOUT}
RETRYABLE = {LOCK_WAIT_TIMEOUT, DEADLOCK}  # transient conflicts (the benchmark's strategies retry both)
# A value that one row's column refuses: too long, truncated, wrong type, NULL, invalid JSON text.
DATA_ERRORS = {1048, 1264, 1265, 1292, 1366, 1406, 3140, 4035, 4036, 4038}
LOCK_WAIT_SECONDS = 1  # innodb_lock_wait_timeout of recheck's sessions (whole seconds, at least 1)


class _Connection(pymysql.connections.Connection):  # type: ignore[misc]
    """PyMySQL's connection, but for one TLS context per process when no TLS option is given.

    Without options PyMySQL prefers TLS (it encrypts if the server offers it, verifying nothing)
    and builds a fresh default context, loading the system's CA certificates, for every
    connection: about 70 ms of CPU each (a dispatcher opens one per job and workload). That
    context is built once here and shared (an SSLContext may wrap many sockets); explicit
    options (ssl_ca, ...) still get their own, as PyMySQL builds them."""

    _preferred: ClassVar[ssl.SSLContext | None] = None
    _preferred_lock = threading.Lock()

    def _create_ssl_ctx(self, sslp: Any) -> ssl.SSLContext:
        if sslp:
            context: ssl.SSLContext = super()._create_ssl_ctx(sslp)
            return context
        with _Connection._preferred_lock:
            if _Connection._preferred is None:
                _Connection._preferred = super()._create_ssl_ctx({})
            return _Connection._preferred


class DatabaseDown(OutageError):
    """MySQL is unreachable or the connection was lost; the caller backs off and retries."""


class DatabaseRefused(DatabaseDown):
    """MySQL answers but refuses to write (read-only): an outage like any other."""

    refusal = True  # logged as "refuses writes" rather than "unreachable"


def error_code(error: Exception) -> int | None:
    args = getattr(error, "args", ())
    return args[0] if args and isinstance(args[0], int) else None


def is_connection_error(error: Exception) -> bool:
    if isinstance(error, pymysql.err.InterfaceError):
        return True  # PyMySQL raises InterfaceError(0, '') when used after the socket died
    return isinstance(error, pymysql.err.OperationalError) and error_code(error) in CONNECTION_LOST


def server_of(workload: Workload) -> str:
    """The MySQL server a workload's workload point at (workloads may use several)."""
    target = workload.mysql
    return target.unix_socket or f"{target.host}:{target.port}"


_last_success: dict[str, float] = {}  # server -> when a statement last succeeded there (monotonic)
_last_write: dict[str, float] = {}  # server -> when a write (or a write probe) last succeeded there


def last_success(server: str) -> float:
    """When a statement last succeeded on any connection of this process to that server.

    An outage is over once real work succeeds again (shared/outage.py): no extra probe that
    could block a loop on a server it was not even using."""
    return _last_success.get(server, 0.0)


def last_write(server: str) -> float:
    """When a write (a transaction: write-backs and the write probe) last succeeded there: a
    server that answers reads may still hold every write up (LOCK TABLES, a metadata lock)."""
    return _last_write.get(server, 0.0)


class Database:
    """One lazily (re)connected PyMySQL connection in autocommit mode, shared safely by threads:
    a statement, or a transaction with all its statements, has the connection to itself (a
    lock). PyMySQL's connection is not thread-safe: two threads at once on it would each read
    the other's replies, and one's statement would join the other's transaction (a per-row
    worker's probe inside its own write-back did both, and the change feed lost transitions)."""

    def __init__(
        self,
        workload: Workload,
        *,
        with_database: bool = True,
        read_timeout: float = 60.0,
        connect_timeout: float = 5.0,
    ):
        self.workload = workload
        self.with_database = with_database
        self.read_timeout = read_timeout
        self.connect_timeout = connect_timeout
        self._conn: pymysql.connections.Connection | None = None
        self.server = server_of(workload)
        self._lock = threading.RLock()  # reentrant: a transaction's own cleanup uses it again

    def _connect(self) -> pymysql.connections.Connection:
        target = self.workload.mysql
        # A dispatch page comes back as one GROUP_CONCAT string (see queries.sql): allow 64 MB.
        init = "SET SESSION group_concat_max_len = 67108864"
        init += f", innodb_lock_wait_timeout = {LOCK_WAIT_SECONDS}"
        if self.workload.deployment.db_time_zone:
            # Validated by Workload against a strict pattern, so quoting it here is safe.
            init += f", time_zone = '{self.workload.deployment.db_time_zone}'"
        tls: dict[str, str | bool] = {
            k: v for k, v in target.tls.items() if k in ("ssl_ca", "ssl_cert", "ssl_key")
        }
        for flag in ("ssl_verify_cert", "ssl_verify_identity"):
            if flag in target.tls:
                tls[flag] = target.tls[flag].lower() in ("1", "true", "yes")
        return _Connection(
            host=target.host,
            port=target.port,
            user=target.user,
            password=target.password,
            database=target.database if self.with_database else None,
            unix_socket=target.unix_socket,
            charset="utf8mb4",
            autocommit=True,
            connect_timeout=self.connect_timeout,
            read_timeout=self.read_timeout,
            write_timeout=self.read_timeout,
            init_command=init,
            **tls,
        )

    @property
    def conn(self) -> pymysql.connections.Connection:
        if self._conn is None:
            try:
                self._conn = self._connect()
            except pymysql.err.MySQLError as error:
                if is_connection_error(error):
                    raise DatabaseDown(str(error)) from error
                raise
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None

    def _translate(self, error: pymysql.err.MySQLError) -> Exception:
        """The exception a caller should see for a server error."""
        if is_connection_error(error):
            self.close()
            return DatabaseDown(str(error))
        if error_code(error) in REFUSING:
            self.close()  # after a failover, a new connection may reach the new primary
            return DatabaseRefused(str(error))
        unchanged: Exception = error  # pymysql is untyped here
        return unchanged

    @contextlib.contextmanager
    def cursor(self) -> Iterator[pymysql.cursors.Cursor]:
        """A cursor whose lost connections and refusals become DatabaseDown."""
        try:
            with self._lock, self.conn.cursor() as cursor:
                yield cursor
        except pymysql.err.MySQLError as error:
            translated = self._translate(error)
            if translated is error:
                raise
            raise translated from error
        _last_success[self.server] = time.monotonic()

    def query(self, sql: str, args: object = None) -> tuple[tuple[Any, ...], ...]:
        with self.cursor() as cursor:
            cursor.execute(sql, args)
            rows: tuple[tuple[Any, ...], ...] = cursor.fetchall()
            return rows

    def render(self, sql: str, args: object) -> str:
        """The statement with its arguments written in, escaped as this connection would (run
        again without arguments, it costs no escaping)."""
        with self.cursor() as cursor:
            rendered: str = cursor.mogrify(sql, args)
            return rendered

    def scalar(self, sql: str, args: object = None) -> Any:
        rows = self.query(sql, args)
        return rows[0][0] if rows else None

    def execute(self, sql: str, args: object = None, attempts: int = 5) -> int:
        """Run one statement (deadlocks retried); returns the affected row count."""
        return self.transaction([(sql, args)], attempts)[0]

    def transaction(self, statements: Sequence[tuple[str, object]], attempts: int = 5) -> list[int]:
        """Run statements in one transaction (a single one in autocommit mode: one round trip);
        affected row counts in order."""

        def run(cursor: Any) -> list[int]:
            return [cursor.execute(sql, args) for sql, args in statements]

        counts: list[int] = self.run_in_transaction(run, attempts, begin=len(statements) > 1)
        return counts

    def run_in_transaction(self, work: Callable[[Any], T], attempts: int = 5, begin: bool = True) -> T:
        """work(cursor) inside one transaction; its result. Deadlocks are retried; a lost
        connection raises DatabaseDown (the transaction was rolled back by the server, or
        committed if the loss came after COMMIT: callers only send fenced, idempotent
        statements, so a retry is safe)."""
        for attempt in range(attempts):
            with self._lock:
                try:
                    return self._run_once(work, begin)
                except pymysql.err.MySQLError as error:
                    translated = self._translate(error)
                    if translated is not error:
                        raise translated from error
                    self.rollback()
                    if error_code(error) != DEADLOCK or attempt + 1 == attempts:
                        raise
            time.sleep(0.01 * 2**attempt)  # a deadlock: again, without holding the connection
        raise AssertionError("unreachable")

    def _run_once(self, work: Callable[[Any], T], begin: bool) -> T:
        conn = self.conn
        if begin:
            conn.begin()
        try:
            with conn.cursor() as cursor:
                result = work(cursor)
        except pymysql.err.MySQLError:
            raise
        except BaseException:
            # A bug or an interrupt inside the work: the connection is dropped (the server rolls
            # back what it holds), never left with a transaction open for its next statement to
            # join, nor with a reply half read.
            self.close()
            raise
        if begin:
            conn.commit()
        _last_success[self.server] = _last_write[self.server] = time.monotonic()
        return result

    def rollback(self) -> None:
        try:
            if self._conn is not None:
                self._conn.rollback()
        except pymysql.err.MySQLError:
            self.close()
