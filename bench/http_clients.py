"""`python -m bench.http_clients`: which HTTP client a per-row async check should use at high
concurrency, measured inside recheck's real worker.

The issue: the docs' per-row check (`httpx.AsyncClient(timeout=5)` at module level, httpx's
default limits) was "the bottleneck at concurrency 100: 3.8 s per call where the service answers
in 20-40 ms". This tool runs, for each client and each concurrency C, the real `recheck run
--workers 1 --concurrency C` (a dispatcher and one worker process: one asyncio loop with C checks
in flight) on a table of its own, on a private MariaDB and Redis (tests/support/servers.py, as
`recheck bench --private` starts them). The check GETs `http://127.0.0.1:PORT/<id>` from a
target served by a separate process (an aiohttp web server: every answer after a random 20-40 ms
`asyncio.sleep`, keep-alive on, as one service behind many rows is). The clients:

- `httpx_default`: `httpx.AsyncClient(timeout=5)`, as README.md and docs/writing-a-check.md show
  it (httpx's default limits: 100 connections, 20 kept alive);
- `httpx_limits`: the same with `httpx.Limits(max_connections=C, max_keepalive_connections=C)`;
- `aiohttp`: one `aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=C),
  timeout=aiohttp.ClientTimeout(total=5))` (aiohttp's default limit is 100 connections);
- only when --clients names them: `httpx_no_keepalive` (`max_connections=C,
  max_keepalive_connections=0`, bench/uptime.py's client), `aiohttp_default` (no connector:
  aiohttp's 100 connections) and `aiohttp_unlimited` (`TCPConnector(limit=0)`).

The table has 50,000 rows due every 5 s, far more than any client gets through, so the worker is
saturated for the whole run. The check times each call itself (`time.perf_counter()` around the
request, body read included) and appends it to a file; after a warm-up, over the next --seconds:
completed checks per second, failed checks by exception, per-call latency p50/p99 as the check
sees it; the target's own view (its handler's time, p50/p99, and how many client connections it
saw); and the CPU of the worker, the target, mariadbd and redis-server, and of the whole machine
(so what else ran shows). Runs are interleaved: round 1 does every concurrency x client, then
round 2, ...

    .venv/bin/pip install -e '.[bench]'   # aiohttp: a benchmark-only dependency
    .venv/bin/python -m bench.http_clients --concurrency 100,200,50 --runs 3 --seconds 20 \
        --clients httpx_default,httpx_limits,httpx_no_keepalive,aiohttp

(about 2 minutes per round and concurrency; the figures in docs/performance.md were taken a
round at a time, `--concurrency C --runs 1`, `aiohttp_default` added at 200.)

`--bare` measures the clients without recheck instead: C tasks in one asyncio loop of this
process, each calling the same check in a loop (the clients' own cost, for comparison).

A source-checkout tool, not part of the test suite: it needs the machine's mariadbd and
redis-server binaries (not the servers on 3306 and 6379) and writes a JSON into bench-results/.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
CLIENTS = ("httpx_default", "httpx_limits", "aiohttp")
EXTRA_CLIENTS = (
    "httpx_no_keepalive",
    "aiohttp_default",
    "aiohttp_unlimited",
)  # only when --clients names them
TABLE = "http_bench"
ROWS = 50_000
INTERVAL = 5
KEY_PREFIX = "httpbench"
TIMEOUT = 5.0  # the client's, as in the docs
ANSWER_S = (0.020, 0.040)
# How the check learns its client, its target and where to log (set by this tool for the workers).
CLIENT_ENV, URL_ENV, CONCURRENCY_ENV, LOG_ENV = (
    "HTTP_BENCH_CLIENT",
    "HTTP_BENCH_URL",
    "HTTP_BENCH_CONCURRENCY",
    "HTTP_BENCH_LOG",
)


# -- the check (imported by the worker as bench.http_clients:check) --


@functools.cache
def client():
    """One client per worker process, made on first use inside the worker's loop (httpx binds to
    the loop lazily, so this is the docs' module-level client; aiohttp needs a running loop)."""
    kind = os.environ.get(CLIENT_ENV, "httpx_default")
    concurrency = int(os.environ.get(CONCURRENCY_ENV, "100"))
    if kind == "httpx_default":
        import httpx

        return httpx.AsyncClient(timeout=TIMEOUT)
    if kind == "httpx_limits":
        import httpx

        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        return httpx.AsyncClient(timeout=TIMEOUT, limits=limits)
    if kind == "httpx_no_keepalive":  # bench/uptime.py's client: a new connection per call
        import httpx

        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=0)
        return httpx.AsyncClient(timeout=TIMEOUT, limits=limits)
    if kind == "aiohttp_unlimited":  # no cap of the session's own: RECHECK_CONCURRENCY bounds the calls
        import aiohttp

        return aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0), timeout=aiohttp.ClientTimeout(total=TIMEOUT)
        )
    if kind == "aiohttp_default":  # aiohttp's default limit: 100 connections
        import aiohttp

        return aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT))
    if kind == "aiohttp":
        import aiohttp

        return aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=concurrency),
            timeout=aiohttp.ClientTimeout(total=TIMEOUT),
        )
    raise ValueError(f"{CLIENT_ENV}={kind!r}: one of {', '.join(CLIENTS + EXTRA_CLIENTS)}")


async def get(url: str) -> int:
    session = client()
    if os.environ.get(CLIENT_ENV, "").startswith("aiohttp"):
        async with session.get(url) as response:
            await response.read()
            return response.status
    response = await session.get(url)
    return response.status_code


@functools.cache
def call_log():
    folder = os.environ.get(LOG_ENV)
    return open(Path(folder) / f"calls-{os.getpid()}.tsv", "a") if folder else None


async def check(row_id) -> str:
    """GET the target for this row; the call's end (wall clock), its latency and outcome logged."""
    started = time.perf_counter()
    outcome = "cancelled"
    try:
        status = await get(f"{os.environ[URL_ENV]}/{row_id}")
        outcome = "ok" if status == 200 else f"http {status}"
        return str(status)
    except Exception as error:
        outcome = type(error).__name__
        raise
    finally:
        log = call_log()
        if log is not None:
            log.write(f"{time.time():.4f}\t{(time.perf_counter() - started) * 1000:.2f}\t{outcome}\n")


# -- the target: a separate process --


def serve(port_file: str) -> None:
    """Answer every GET after 20-40 ms; /stats?since=&until= tells what it saw between two times."""
    from aiohttp import web

    seen: list[tuple[float, float, int]] = []  # (end, handler ms, client port)

    async def answer(request: web.Request) -> web.Response:
        started = time.perf_counter()
        await asyncio.sleep(random.uniform(*ANSWER_S))
        peer = request.transport.get_extra_info("peername") if request.transport else None
        seen.append((time.time(), (time.perf_counter() - started) * 1000, peer[1] if peer else 0))
        return web.Response(text="ok\n")

    async def stats(request: web.Request) -> web.Response:
        since, until = float(request.query["since"]), float(request.query["until"])
        inside = [s for s in seen if since <= s[0] < until]
        del seen[: len(seen) - sum(1 for s in seen if s[0] >= since)]  # keep memory bounded
        ms = [s[1] for s in inside]
        return web.json_response(
            {"answers": len(inside), "handler_ms": spread(ms), "client_ports": len({s[2] for s in inside})}
        )

    app = web.Application()
    app.router.add_get("/stats", stats)
    app.router.add_get("/{row}", answer)

    async def main() -> None:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, backlog=4096)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        Path(port_file).write_text(str(port))
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        await stop.wait()
        await runner.cleanup()

    asyncio.run(main())


def start_target(folder: Path) -> tuple[subprocess.Popen, str]:
    port_file = folder / "target.port"
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.http_clients", "--serve", str(port_file)], cwd=REPO
    )
    deadline = time.monotonic() + 20
    while not port_file.exists() or not port_file.read_text():
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("the target server did not start")
        time.sleep(0.05)
    return process, f"http://127.0.0.1:{port_file.read_text()}"


def target_stats(url: str, since: float, until: float) -> dict:
    import httpx

    return httpx.get(f"{url}/stats", params={"since": since, "until": until}, timeout=10).json()


# -- figures --


def spread(values: list[float]) -> dict:
    if not values:
        return {"n": 0}
    ordered = sorted(values)
    return {
        "n": len(ordered),
        "p50": round(statistics.median(ordered), 1),
        "p99": round(ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], 1),
        "max": round(ordered[-1], 1),
    }


def read_calls(folder: Path, since: float, until: float) -> tuple[list[float], dict[str, int]]:
    latencies, outcomes = [], {}
    for path in folder.glob("calls-*.tsv"):
        for line in path.read_text().splitlines():
            end, ms, outcome = line.split("\t")
            if since <= float(end) < until:
                outcomes[outcome] = outcomes.get(outcome, 0) + 1
                if outcome == "ok":
                    latencies.append(float(ms))
    return latencies, outcomes


class CpuWatch:
    """CPU seconds of named processes, and of the whole machine, between start() and stop()."""

    def __init__(self, named: dict[str, list[int]]):
        self.named = named

    @staticmethod
    def _every() -> dict[int, tuple[str, float]]:
        found = {}
        for p in psutil.process_iter(["name", "cpu_times"]):
            times = p.info["cpu_times"]
            if times is not None:
                found[p.pid] = (p.info["name"], times.user + times.system)
        return found

    @staticmethod
    def _machine() -> float:
        t = psutil.cpu_times()
        return t.user + t.nice + t.system + t.irq + t.softirq + getattr(t, "steal", 0.0)

    def start(self) -> None:
        self.t0, self.machine0, self.every0 = time.monotonic(), self._machine(), self._every()

    def stop(self) -> dict:
        elapsed, machine, every = time.monotonic() - self.t0, self._machine() - self.machine0, self._every()
        used = {pid: cpu - self.every0[pid][1] for pid, (_, cpu) in every.items() if pid in self.every0}
        ours: set[int] = set()
        found = {}
        for name, pids in self.named.items():
            found[name] = round(sum(used.get(pid, 0.0) for pid in pids) / elapsed, 3)
            ours.update(pids)
        others = sorted(
            ((cpu, every[pid][0]) for pid, cpu in used.items() if pid not in ours and pid != os.getpid()),
            reverse=True,
        )
        # Everything else, short-lived processes (a test suite's) included: the machine less ours.
        found["others"] = round(max(0.0, machine / elapsed - sum(found.values())), 3)
        found["machine"] = round(machine / elapsed, 3)
        found["others_top"] = [
            f"{name} {cpu / elapsed:.2f}" for cpu, name in others[:4] if cpu / elapsed >= 0.02
        ]
        return found  # in cores (CPU seconds per second)


# -- one run --


def recheck_env(mysql_url: str, redis_url: str, target: str, kind: str, concurrency: int, log: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RECHECK_")}
    env.update(
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        RECHECK_MYSQL_URL=mysql_url,
        RECHECK_REDIS_URL=redis_url,
        RECHECK_TABLE=TABLE,
        RECHECK_INTERVAL=str(INTERVAL),
        RECHECK_CHECK="bench.http_clients:check",
        RECHECK_KEY_PREFIX=KEY_PREFIX,
        RECHECK_DASHBOARD_PORT="0",
        RECHECK_METRICS_PORT="0",
        RECHECK_CONFIG="",
        **{CLIENT_ENV: kind, URL_ENV: target, CONCURRENCY_ENV: str(concurrency), LOG_ENV: str(log)},
    )
    return env


def recheck(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "recheck", *arguments]


def run_in_recheck(args, servers, target, kind: str, concurrency: int, work: Path) -> dict:
    log = work / f"calls-{kind}-{concurrency}-{time.time():.0f}"
    log.mkdir()
    mysql, cache, target_process = servers
    env = recheck_env(mysql.url("recheck"), cache.url(), target, kind, concurrency, log)
    cache.client().flushall()  # the private Redis: nothing of the last run's queue or in-flight ids
    total = args.warmup + args.seconds
    command = recheck(
        "run", "--workers", "1", "--duration", f"{total + 1:g}", "--concurrency", str(concurrency)
    )
    with open(log / "run.log", "w") as out:
        t0 = time.time()
        run = subprocess.Popen(command, env=env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
        try:
            time.sleep(args.warmup)
            children = psutil.Process(run.pid).children(recursive=True)
            workers = [c.pid for c in children if "recheck.workers" in " ".join(command_line(c))]
            others = [c.pid for c in children if c.pid not in workers] + [run.pid]
            watch = CpuWatch(
                {
                    "worker": workers,
                    "dispatcher+run": others,
                    "target": [target_process.pid],
                    "mariadbd": [mysql.process.pid],
                    "redis": [cache.process.pid],
                }
            )
            since = time.time()
            watch.start()
            time.sleep(args.seconds)
            until = time.time()
            cpu = watch.stop()
            code = run.wait(timeout=120)
        finally:
            if run.poll() is None:
                run.terminate()
                run.wait()
    return figures(log, since, until, cpu, target, code, t0, (log / "run.log").read_text())


def command_line(process: psutil.Process) -> list[str]:
    """A child that just exited (a worker that failed to start) has none."""
    try:
        return process.cmdline()
    except psutil.Error:
        return []


def run_bare(args, servers, target, kind: str, concurrency: int, work: Path) -> dict:
    """The same check, C at a time, in this process's own loop: no recheck."""
    log = work / f"bare-{kind}-{concurrency}-{time.time():.0f}"
    log.mkdir()
    os.environ.update(
        {CLIENT_ENV: kind, URL_ENV: target, CONCURRENCY_ENV: str(concurrency), LOG_ENV: str(log)}
    )
    client.cache_clear()
    call_log.cache_clear()
    _, _, target_process = servers
    watch = CpuWatch({"client (this process)": [os.getpid()], "target": [target_process.pid]})
    marks = {}

    async def lane(i: int, deadline: float) -> None:
        n = 0
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                await check(f"{i}-{n}")
            n += 1

    async def main() -> None:
        deadline = time.monotonic() + args.warmup + args.seconds
        tasks = [asyncio.create_task(lane(i, deadline)) for i in range(concurrency)]
        await asyncio.sleep(args.warmup)
        marks["since"] = time.time()
        watch.start()
        await asyncio.sleep(args.seconds)
        marks["until"] = time.time()
        marks["cpu"] = watch.stop()
        await asyncio.gather(*tasks)
        made = client()
        await (made.close() if kind.startswith("aiohttp") else made.aclose())

    t0 = time.time()
    asyncio.run(main())
    call_log().close()
    call_log.cache_clear()
    client.cache_clear()
    return figures(log, marks["since"], marks["until"], marks["cpu"], target, 0, t0, "")


def figures(log: Path, since, until, cpu, target, code, t0, run_log) -> dict:
    latencies, outcomes = read_calls(log, since, until)
    seconds = until - since
    served = target_stats(target, since, until)
    return {
        "started": time.strftime("%H:%M:%S", time.localtime(t0)),
        "seconds": round(seconds, 2),
        "checks_per_s": round(outcomes.get("ok", 0) / seconds, 1),
        "failed": {k: v for k, v in outcomes.items() if k != "ok"},
        "latency_ms": spread(latencies),
        "target": served,
        "cpu_cores": cpu,
        "run_exit": code,
        "run_log_tail": run_log.rstrip().splitlines()[-4:],
    }


def line(kind: str, concurrency: int, found: dict) -> str:
    lat, served, cpu = found["latency_ms"], found["target"], found["cpu_cores"]
    handler = served["handler_ms"]
    failed = sum(found["failed"].values())
    ideal = concurrency / statistics.mean(ANSWER_S)
    client_cpu = cpu.get("worker", cpu.get("client (this process)", 0.0))
    per_check = client_cpu / max(found["checks_per_s"], 1e-9) * 1e6
    return (
        f"{found['started']} C={concurrency:<3} {kind:<13} {found['checks_per_s']:>8,.0f}/s "
        f"({found['checks_per_s'] / ideal:4.0%} of {ideal:,.0f}) failed {failed:>5} "
        f"latency p50 {lat.get('p50', 0):>7.1f} p99 {lat.get('p99', 0):>7.1f} ms | "
        f"target p50 {handler.get('p50', 0):.1f} p99 {handler.get('p99', 0):.1f} ms, "
        f"{served['client_ports']:,} conns | cpu: client {client_cpu:.2f} ({per_check:,.0f} µs/check) "
        f"target {cpu['target']:.2f} mariadbd {cpu.get('mariadbd', 0):.2f} redis {cpu.get('redis', 0):.2f} "
        f"machine {cpu['machine']:.2f} others {cpu['others']:.2f} {' '.join(cpu['others_top'])}"
    )


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.http_clients", description=__doc__.split("\n")[0])
    parser.add_argument("--concurrency", default="100,200,50", help="checks in flight, comma-separated")
    parser.add_argument(
        "--clients", default=",".join(CLIENTS), help="comma-separated: " + ", ".join(CLIENTS + EXTRA_CLIENTS)
    )
    parser.add_argument("--runs", type=int, default=3, help="rounds, each running every configuration")
    parser.add_argument("--seconds", type=float, default=20.0, help="measured window of each run")
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds before the window")
    parser.add_argument("--bare", action="store_true", help="no recheck: C tasks in this process's loop")
    parser.add_argument("--out", default="bench-results")
    parser.add_argument("--serve", metavar="PORT_FILE", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    if args.serve:
        serve(args.serve)
        return 0
    from tests.support.servers import MariaDBServer, RedisServer

    concurrencies = [int(c) for c in args.concurrency.split(",")]
    kinds = args.clients.split(",")
    work = Path(tempfile.mkdtemp(prefix="http-clients-"))
    started: list = []
    results = []
    try:
        target_process, target = start_target(work)
        started.append(target_process)
        mysql = cache = None
        if not args.bare:
            mysql = MariaDBServer(work / "mysql")
            started.append(mysql)
            mysql.start()
            cache = RedisServer(work / "redis")
            started.append(cache)
            cache.start()
            env = recheck_env(mysql.url("recheck"), cache.url(), target, "httpx_default", 1, work)
            for step in (("init-db", "--create"), ("seed", "--rows", str(ROWS), "--due-now", "--truncate")):
                done = subprocess.run(recheck(*step), env=env, cwd=REPO, capture_output=True, text=True)
                if done.returncode != 0:
                    print(f"recheck {' '.join(step)} failed:\n{done.stdout}{done.stderr}", file=sys.stderr)
                    return 1
        print(
            f"target {target} (answers after {ANSWER_S[0] * 1000:g}-{ANSWER_S[1] * 1000:g} ms); "
            + (
                "bare clients in this process's loop"
                if args.bare
                else f"recheck run --workers 1 on a private mariadbd :{mysql.port} and redis-server "
                f":{cache.port}, {ROWS:,} rows due every {INTERVAL} s"
            )
            + f"; {args.warmup:g} s warm-up, {args.seconds:g} s measured; CPU in cores",
            flush=True,
        )
        measure = run_bare if args.bare else run_in_recheck
        for round_ in range(1, args.runs + 1):
            for concurrency in concurrencies:
                for kind in kinds:
                    found = measure(args, (mysql, cache, target_process), target, kind, concurrency, work)
                    found.update(round=round_, client=kind, concurrency=concurrency)
                    results.append(found)
                    print(f"[{round_}] " + line(kind, concurrency, found), flush=True)
                    if found["failed"]:
                        print(f"    failed: {found['failed']}", flush=True)
                    if not found["checks_per_s"]:
                        tail = found["run_log_tail"]
                        print("    recheck run's last lines:", *tail, sep="\n    ", flush=True)
    finally:
        for each in reversed(started):
            with contextlib.suppress(Exception):
                if isinstance(each, subprocess.Popen):
                    each.terminate()
                    each.wait(timeout=30)
                else:
                    each.stop()
        shutil.rmtree(work, ignore_errors=True)
    summary(results, kinds, concurrencies)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / time.strftime("http-clients-%Y%m%d-%H%M%S.json")
    path.write_text(json.dumps({"arguments": vars(args), "runs": results}, indent=1))
    print(f"figures: {path}")
    return 0


def summary(results: list[dict], kinds: list[str], concurrencies: list[int]) -> None:
    print("\nranges over the runs: checks/s | latency p50 ms | p99 ms | client CPU µs/check | failed")
    for concurrency in concurrencies:
        for kind in kinds:
            runs = [r for r in results if r["client"] == kind and r["concurrency"] == concurrency]
            if not runs:
                continue

            def span(values, fmt="{:,.0f}"):
                return f"{fmt.format(min(values))}-{fmt.format(max(values))}"

            rate = [r["checks_per_s"] for r in runs]
            p50 = [r["latency_ms"].get("p50", 0) for r in runs]
            p99 = [r["latency_ms"].get("p99", 0) for r in runs]
            cpu = [
                r["cpu_cores"].get("worker", r["cpu_cores"].get("client (this process)", 0))
                / max(r["checks_per_s"], 1e-9)
                * 1e6
                for r in runs
            ]
            failed = [sum(r["failed"].values()) for r in runs]
            print(
                f"C={concurrency:<3} {kind:<13} {span(rate):>13} | {span(p50, '{:.1f}'):>13} | "
                f"{span(p99, '{:.1f}'):>13} | {span(cpu):>11} | {span(failed)}"
            )


if __name__ == "__main__":
    raise SystemExit(main())
