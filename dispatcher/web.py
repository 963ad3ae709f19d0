"""The dashboard: one read-only page and the JSON it polls, served by each dispatcher.

Standard library only (http.server, one thread per request). It binds to localhost unless
RECHECK_DASHBOARD_HOST says otherwise, accepts only GET, and serves what the monitor has
already sampled: opening the page never queries MySQL.
"""

from __future__ import annotations

import json
import logging
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from urllib.parse import parse_qs, urlsplit

from dispatcher.monitor import Monitor
from shared.db import Database, DatabaseDown
from shared.redisconn import REDIS_DOWN
from shared.rowstory import row_story
from shared.schema import describe_table
from shared.status import headline

log = logging.getLogger(__name__)


def page() -> bytes:
    return resources.files("dispatcher").joinpath("static", "dashboard.html").read_bytes()


class Dashboard:
    def __init__(self, monitors: list[Monitor], host: str, port: int):
        self.monitors = {monitor.workload: monitor for monitor in monitors}
        self.host = host
        self.port = port
        self.server: ThreadingHTTPServer | None = None

    def status(self, workload: str | None) -> dict | None:
        """One workload's sampled facts and history (the first workload's by default), and a
        line on every workload for the page's picker; None for an unknown workload."""
        monitor = self.monitors.get(workload) if workload else next(iter(self.monitors.values()))
        if monitor is None:
            return None
        snapshot = monitor.snapshot()
        snapshot["title"] = monitor.title
        snapshot["workload"] = monitor.workload
        snapshot["workloads"] = [
            {"name": name, "title": other.title, **summary(other.snapshot()["facts"])}
            for name, other in self.monitors.items()
        ]
        return snapshot

    def row(self, workload: str | None, key_text: str | None) -> tuple[HTTPStatus, dict]:
        """One row's story (what `recheck inspect` prints), for the page's search box."""
        monitor = self.monitors.get(workload) if workload else next(iter(self.monitors.values()))
        if monitor is None or key_text is None:
            return HTTPStatus.NOT_FOUND, {"error": "say which row: /api/row?id=ID[&workload=NAME]"}
        settings, store = monitor.sampler.settings, monitor.sampler.store
        db = Database(settings, read_timeout=5.0)  # this request's own connection
        try:
            keys = describe_table(settings, db).keys
            try:
                key = keys.from_text(key_text)
            except ValueError as error:
                return HTTPStatus.BAD_REQUEST, {"error": str(error)}
            story = row_story(settings, db, store, keys, key)
        except (DatabaseDown, *REDIS_DOWN) as error:
            return HTTPStatus.SERVICE_UNAVAILABLE, {"error": f"cannot look it up now: {error}"}
        finally:
            db.close()
        if story is None:
            return HTTPStatus.NOT_FOUND, {"error": f"no row with id {key_text!r} in {monitor.title}"}
        return HTTPStatus.OK, story

    def start(self) -> bool:
        if not self.port:
            return False
        handler = type("DashboardHandler", (Handler,), {"dashboard": self})
        try:
            self.server = ThreadingHTTPServer((self.host, self.port), handler)
        except OSError as error:
            log.warning("dashboard not served: cannot listen on %s:%d (%s)", self.host, self.port, error)
            return False
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, name="dashboard", daemon=True).start()
        log.info("dashboard on http://%s:%d/", self.host, self.server.server_address[1])
        return True

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


def summary(facts: dict | None) -> dict:
    """What the workload picker shows of a workload: its state and headline."""
    if not facts:
        return {"state": "unknown", "headline": "waiting for the first sample"}
    state = "fresh" if facts["fresh"] else "overdue" if facts["overdue_1s"] else "failing"
    return {"state": state, "headline": headline(facts)}


class Handler(BaseHTTPRequestHandler):
    dashboard: Dashboard
    server_version = "recheck"
    sys_version = ""

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        if url.path == "/":
            self.reply(HTTPStatus.OK, "text/html; charset=utf-8", page())
        elif url.path == "/api/status":
            workload = query.get("workload", [None])[0]
            snapshot = self.dashboard.status(workload)
            if snapshot is None:
                body = json.dumps({"error": f"no workload {workload!r}"}).encode()
                self.reply(HTTPStatus.NOT_FOUND, "application/json", body)
                return
            self.reply(HTTPStatus.OK, "application/json", json.dumps(snapshot, default=str).encode())
        elif url.path == "/api/row":
            workload, key = query.get("workload", [None])[0], query.get("id", [None])[0]
            status, story = self.dashboard.row(workload, key)
            self.reply(status, "application/json", json.dumps(story, default=str).encode())
        elif url.path == "/healthz":
            self.reply(HTTPStatus.OK, "text/plain", b"ok\n")
        else:
            self.reply(HTTPStatus.NOT_FOUND, "text/plain", b"not found\n")

    def refuse(self) -> None:
        self.reply(HTTPStatus.METHOD_NOT_ALLOWED, "text/plain", b"read-only\n", allow="GET")

    do_POST = do_PUT = do_DELETE = do_PATCH = refuse

    def reply(self, status: HTTPStatus, content_type: str, body: bytes, **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        for name, value in headers.items():
            self.send_header(name.title(), value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args) -> None:
        log.debug("dashboard %s - " + format, self.address_string(), *args)
