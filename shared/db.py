"""MySQL connections. Lost connections become DatabaseDown so every loop handles them alike."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator, Sequence

import pymysql

from shared.config import Settings

log = logging.getLogger(__name__)

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
# Transient conflicts: retrying the same transaction is correct.
RETRYABLE = {1205, 1213}  # lock wait timeout, deadlock


class DatabaseDown(Exception):
    """MySQL is unreachable or the connection was lost; the caller backs off and retries."""


def _error_code(error: Exception) -> int | None:
    args = getattr(error, "args", ())
    return args[0] if args and isinstance(args[0], int) else None


def is_connection_error(error: Exception) -> bool:
    if isinstance(error, pymysql.err.InterfaceError):
        return True  # PyMySQL raises InterfaceError(0, '') when used after the socket died
    return isinstance(error, pymysql.err.OperationalError) and _error_code(error) in CONNECTION_LOST


def probe(settings: Settings) -> None:
    """Open and close one connection; raises if MySQL cannot be reached."""
    db = Database(settings, read_timeout=5)
    try:
        db.scalar("SELECT 1")
    finally:
        db.close()


class Database:
    """One lazily (re)connected PyMySQL connection in autocommit mode. Not thread-safe."""

    def __init__(self, settings: Settings, *, with_database: bool = True, read_timeout: float = 60.0):
        self.settings = settings
        self.with_database = with_database
        self.read_timeout = read_timeout
        self._conn: pymysql.connections.Connection | None = None

    def _connect(self) -> pymysql.connections.Connection:
        target = self.settings.mysql
        # A dispatch page comes back as one GROUP_CONCAT string (see queries.sql): allow 64 MB.
        init = "SET SESSION group_concat_max_len = 67108864"
        if self.settings.db_time_zone:
            # Validated by Settings against a strict pattern, so quoting it here is safe.
            init += f", time_zone = '{self.settings.db_time_zone}'"
        tls = {key: value for key, value in target.tls.items() if key in ("ssl_ca", "ssl_cert", "ssl_key")}
        for flag in ("ssl_verify_cert", "ssl_verify_identity"):
            if flag in target.tls:
                tls[flag] = target.tls[flag].lower() in ("1", "true", "yes")
        return pymysql.connect(
            host=target.host,
            port=target.port,
            user=target.user,
            password=target.password,
            database=target.database if self.with_database else None,
            unix_socket=target.unix_socket,
            charset="utf8mb4",
            autocommit=True,
            connect_timeout=5,
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

    def _lost(self, error: Exception) -> DatabaseDown:
        self.close()
        return DatabaseDown(str(error))

    @contextlib.contextmanager
    def cursor(self) -> Iterator[pymysql.cursors.Cursor]:
        """A cursor whose lost-connection errors become DatabaseDown (and drop the connection)."""
        try:
            with self.conn.cursor() as cursor:
                yield cursor
        except pymysql.err.MySQLError as error:
            if is_connection_error(error):
                raise self._lost(error) from error
            raise

    def query(self, sql: str, args: object = None) -> tuple[tuple, ...]:
        with self.cursor() as cursor:
            cursor.execute(sql, args)
            return cursor.fetchall()

    def scalar(self, sql: str, args: object = None):
        rows = self.query(sql, args)
        return rows[0][0] if rows else None

    def execute(self, sql: str, args: object = None) -> int:
        """Run one statement; returns the affected row count."""
        with self.cursor() as cursor:
            return cursor.execute(sql, args)

    def transaction(self, statements: Sequence[tuple[str, object]], attempts: int = 5) -> list[int]:
        """Run statements in one transaction; affected row counts in order.

        Deadlocks and lock wait timeouts are retried; a lost connection raises DatabaseDown
        (the transaction was rolled back by the server, or committed if the loss came after
        COMMIT: callers only send fenced, idempotent statements, so a retry is safe).
        """
        for attempt in range(attempts):
            try:
                conn = self.conn
                conn.begin()
                with conn.cursor() as cursor:
                    counts = [cursor.execute(sql, args) for sql, args in statements]
                conn.commit()
                return counts
            except pymysql.err.MySQLError as error:
                if is_connection_error(error):
                    raise self._lost(error) from error
                self.rollback()
                if _error_code(error) in RETRYABLE and attempt + 1 < attempts:
                    time.sleep(0.01 * 2**attempt)
                    continue
                raise
        raise AssertionError("unreachable")

    def rollback(self) -> None:
        try:
            if self._conn is not None:
                self._conn.rollback()
        except pymysql.err.MySQLError:
            self.close()
