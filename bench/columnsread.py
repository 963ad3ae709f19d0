"""`python -m bench.columnsread`: what reading a take's rows for `columns` costs, row by row
(queries.sql `check_rows`, PyMySQL decoding each field) against one string (`check_rows_text`,
shared/mysql/rowtext.py), on a table whose check columns hold values.

Seeds `--rows` rows into its own database (`recheck_columnsread`, dropped at the end) with a
VARCHAR and a DATETIME set, then reads the first `--take` of them `--reads` times each way, in
`--rounds` alternating rounds. Per row: this process's CPU (the read, and the read-only mappings
a check gets) and mariadbd's CPU (psutil; its background threads count too).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from types import MappingProxyType

import pymysql

from bench.procs import cpu_seconds, pids_named
from recheck.commands.init_db import init_db
from recheck.commands.seed import seed
from recheck.shared.config import Settings
from recheck.shared.mysql.db import Database
from recheck.shared.mysql.rows import Rows

DATABASE = "recheck_columnsread"


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.columnsread", description=__doc__.split("\n")[0])
    parser.add_argument("--mysql", default="root@127.0.0.1:3306", help="user@host:port of the server")
    parser.add_argument("--rows", type=int, default=20_000, help="rows seeded")
    parser.add_argument("--take", type=int, default=4_000, help="rows per read (a take)")
    parser.add_argument("--reads", type=int, default=100, help="reads per way and round")
    parser.add_argument("--rounds", type=int, default=3)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = arguments(argv)
    user, _, address = args.mysql.partition("@")
    host, _, port = address.partition(":")
    admin = pymysql.connect(host=host, port=int(port or 3306), user=user, autocommit=True)
    admin.cursor().execute(f"CREATE DATABASE IF NOT EXISTS `{DATABASE}`")
    workload = Settings(
        _env_file=None, mysql_url=f"mysql://{user}@{address}/{DATABASE}", columns=["status", "checked_at"]
    ).default_workload()
    try:
        init_db(workload, apply=True, say=lambda _: None)
        db = Database(workload)
        seed(workload, db, args.rows, truncate=True)
        db.execute(
            "UPDATE user_block_status SET status = 'ok', checked_at = NOW(6) - INTERVAL user_id SECOND"
        )
        rows = Rows(workload, db)
        assert rows.table.row_text is not None, "these columns are read as one string"
        run(rows, args)
        db.close()
    finally:
        admin.cursor().execute(f"DROP DATABASE IF EXISTS `{DATABASE}`")


def run(rows: Rows, args: argparse.Namespace) -> None:
    keys = list(range(1, args.take + 1))
    batch = {"keys": json.dumps(keys)}
    names = (rows.workload.id_column, *rows.workload.columns)
    row_text = rows.table.row_text
    assert row_text is not None

    def mappings(found: dict) -> list:  # what workers/loopbase.py gives the check, key by key
        return [MappingProxyType(found[key]) for key in keys]

    def by_row() -> list:  # the read before 2026-11-26, as it built the check's mappings
        found = {row[0]: row[1:] for row in rows.db.query(rows.queries.check_rows, batch)}
        return [MappingProxyType(dict(zip(names, (key, *found[key]), strict=True))) for key in keys]

    def one_string() -> list:  # what a worker runs now: Rows.check_rows and the mappings
        return mappings(rows.check_rows(keys))

    assert [dict(r) for r in by_row()] == [dict(r) for r in one_string()], "both ways read the same"
    server = pids_named("mariadbd")
    print(f"{args.take:,}-row reads, {args.reads} per way and round; CPU per row:")
    for number in range(1, args.rounds + 1):
        for name, read in (("row by row", by_row), ("one string", one_string)):
            client, mariadbd = measure(read, args.reads, server)
            per_row = 1e6 / (args.reads * args.take)
            worker, server_us = client * per_row, mariadbd * per_row
            print(f"  round {number} {name:10s}  worker {worker:5.2f} us   mariadbd {server_us:5.2f} us")
    found = rows.check_rows(keys)
    started = time.process_time()
    for _ in range(args.reads):
        mappings(found)
    spent = time.process_time() - started
    print(f"  the mappings alone: {spent * 1e6 / (args.reads * args.take):.2f} us")


def measure(read: Callable[[], list], reads: int, server: list[int]) -> tuple[float, float]:
    """(this process's CPU seconds, every mariadbd's) over `reads` reads: run it where no other
    server is busy."""

    def servers() -> float:
        return sum(cpu_seconds(pid) or 0.0 for pid in server)

    client, before = time.process_time(), servers()
    for _ in range(reads):
        read()
    return time.process_time() - client, servers() - before


if __name__ == "__main__":
    main()
