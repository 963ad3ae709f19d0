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

from dispatcher.monitor import Monitor

log = logging.getLogger(__name__)


def page() -> bytes:
    return resources.files("dispatcher").joinpath("static", "dashboard.html").read_bytes()


class Dashboard:
    def __init__(self, monitor: Monitor, host: str, port: int, title: str):
        self.monitor = monitor
        self.host = host
        self.port = port
        self.title = title
        self.server: ThreadingHTTPServer | None = None

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


class Handler(BaseHTTPRequestHandler):
    dashboard: Dashboard
    server_version = "recheck"
    sys_version = ""

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/":
            self.reply(HTTPStatus.OK, "text/html; charset=utf-8", page())
        elif path == "/api/status":
            snapshot = self.dashboard.monitor.snapshot()
            snapshot["title"] = self.dashboard.title
            self.reply(HTTPStatus.OK, "application/json", json.dumps(snapshot, default=str).encode())
        elif path == "/healthz":
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
