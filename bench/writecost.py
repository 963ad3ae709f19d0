"""`python -m bench.writecost`: what MySQL spends per row on a write-back, recheck's statement
beside the forms it could take and the hand-batched job's plain `UPDATE ... WHERE id IN (...)`.

Starts a private MariaDB (the settings of `recheck bench --private`), alone on core
`--mysql-core` while this process runs on the others, seeds `--rows` rows, then writes all of
them once per statement kind and round, `--batch` rows per statement, every row's due time set
to one known value before each pass so that every fence matches. Per row: mariadbd's CPU
(psutil; its background threads count too). A first pass of recheck's own statement warms the
server up and is not counted. docs/performance.md has the figures.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from bench.compare import private_mariadb
from bench.procs import cpu_seconds
from recheck.commands.init_db import init_db
from recheck.commands.seed import seed
from recheck.shared.config import Settings, Workload
from recheck.shared.mysql.db import Database
from recheck.shared.mysql.rows import Rows
from recheck.shared.mysql.sql import JITTER_RUNS, Queries, interval_params, quote
from recheck.workers.writing.writeback import jitter_steps

DUE = "2026-01-01 00:00:00.000"  # every row's due time before a pass
DUE_MS = 1_767_225_600_000  # the same, as the milliseconds after 1970-01-01 entries carry
FENCE = "TIMESTAMP'1970-01-01 00:00:00' + INTERVAL v.due_ms * 1000 MICROSECOND"

Statement = tuple[str, dict]
Kind = tuple[str, Callable[[list[int]], Statement]]


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.writecost", description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows seeded, all written each pass")
    parser.add_argument("--batch", type=int, default=4_000, help="rows per statement")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--mysql-core", type=int, default=0, metavar="N", help="MariaDB's core (-1: not pinned)"
    )
    return parser.parse_args(argv)


def changed(old: str, new: str) -> str:
    """`new`, which must differ from `old` (a statement kind that changes nothing measures nothing)."""
    if new == old:
        raise RuntimeError("a statement kind that is recheck's own: queries.sql changed shape")
    return new


def kinds(workload: Workload, write_success: str) -> Iterator[Kind]:
    """(name, batch -> statement) for each statement kind measured."""
    params = interval_params(workload)
    w = workload
    table, key, due = quote(w.table), quote(w.id_column), quote(w.due_column)
    fails, error = quote(w.fail_column), quote(w.error_column)
    steps = jitter_steps(params["interval_us"], w.jitter, params["min_interval_us"])  # the worker's 8

    def rows(batch: list[int], after: bool = False) -> dict:
        found = [[k, DUE_MS, "ok", steps[k % JITTER_RUNS]] if after else [k, DUE_MS, "ok"] for k in batch]
        return {"batch": json.dumps(found), **params}

    def keyed(batch: list[int], **more) -> dict:
        return {**params, "result": "ok", "ids": batch, "due": DUE, **more}

    unfenced = changed(write_success, write_success.replace(f" AND t.{due} = {FENCE}", ""))
    unset = write_success.replace(f"t.{fails} = 0,", "").replace(f"t.{error} = NULL", "")
    unset = changed(write_success, unset.rstrip().rstrip(","))
    plain = (
        f"UPDATE {table} SET {quote(w.result_column)} = %(result)s, {quote(w.checked_column)} = NOW(3), "
        f"{due} = NOW(3) + INTERVAL %(interval_us)s MICROSECOND, "
        f"{quote(w.count_column)} = {quote(w.count_column)} + 1"
    )
    reset = f"{plain}, {fails} = 0, {error} = NULL"
    yield "recheck's write (JSON_TABLE, fenced)", lambda b: (write_success, rows(b))
    yield "  with an after_us in every row", lambda b: (write_success, rows(b, after=True))
    yield "  without the fence", lambda b: (unfenced, rows(b))
    yield "  without fails = 0, error = NULL", lambda b: (unset, rows(b))
    pairs = f"{reset} WHERE ({key}, {due}) IN %(pairs)s"
    yield "fenced as (id, due) IN ((..), ..)", lambda b: (pairs, keyed(b, pairs=[(k, DUE) for k in b]))
    yield (
        "id IN (..) AND due = one value",
        lambda b: (f"{reset} WHERE {key} IN %(ids)s AND {due} = %(due)s", keyed(b)),
    )
    yield "the job's plain UPDATE ... IN", lambda b: (f"{plain} WHERE {key} IN %(ids)s", keyed(b))


def main(argv: list[str] | None = None) -> None:
    args = arguments(argv)
    folder = Path(tempfile.mkdtemp(prefix="recheck-writecost-"))
    started: list = []
    try:
        server = private_mariadb(folder, started, print, args.mysql_core if args.mysql_core >= 0 else None)
        assert server.process is not None
        run(server.port, server.process.pid, args)
    finally:
        for one in started:
            one.kill()
        shutil.rmtree(folder, ignore_errors=True)


def run(port: int, pid: int, args: argparse.Namespace) -> None:
    settings = Settings(_env_file=None, mysql_url=f"mysql://root@127.0.0.1:{port}/recheck")
    workload = settings.default_workload()
    admin = Database(workload, with_database=False)
    admin.execute(Queries(workload).create_database)
    admin.close()
    init_db(workload, apply=True, say=lambda _: None)
    db = Database(workload)
    seed(workload, db, args.rows, truncate=True)
    rows = Rows(workload, db)
    rows.table  # noqa: B018 (the key kind, which the statements name)
    table, key, due = (quote(n) for n in (workload.table, workload.id_column, workload.due_column))
    keys = [k for (k,) in db.query(f"SELECT {key} FROM {table} ORDER BY {key}")]
    measured = list(kinds(workload, rows.queries.write_success))

    def one_pass(make: Callable[[list[int]], Statement]) -> float:
        db.execute(f"UPDATE {table} SET {due} = %(due)s", {"due": DUE})
        time.sleep(1)  # the purge of that update's old versions, mostly
        before, written = cpu_seconds(pid) or 0.0, 0
        for at in range(0, len(keys), args.batch):
            sql, params = make(keys[at : at + args.batch])
            written += db.execute(sql, params)
        if written != len(keys):
            raise RuntimeError(f"{written:,} of {len(keys):,} rows written: a fence did not match")
        return ((cpu_seconds(pid) or 0.0) - before) * 1e6 / len(keys)

    one_pass(measured[0][1])  # warming up
    print(f"{args.rows:,} rows written in statements of {args.batch:,}; mariadbd CPU per row:")
    for number in range(1, args.rounds + 1):
        for name, make in measured:
            print(f"  round {number}  {name:40s} {one_pass(make):5.2f} us", flush=True)
    db.close()


if __name__ == "__main__":
    main()
