"""The dashboard: one page and the JSON it polls, served by each dispatcher.

Standard library only (http.server, one thread per request). It binds to localhost unless
RECHECK_DASHBOARD_HOST says otherwise and serves what the monitor has already sampled: opening
the page never queries MySQL.

Read-only unless RECHECK_DASHBOARD_TOKEN is set. With a token it also takes the application's
actions (now, pause, resume, release: recheck/client.py) as POST /api/action, and only a POST
that carries the token in the X-Recheck-Token header, as JSON, from the page's own origin:
a cross-site form cannot set that header or that content type, a cross-site script's request
with them needs a CORS preflight this server never grants, and GET changes nothing. Every
action, done or refused, is logged with its ids.

Every request must name this server in its Host header (localhost, 127.0.0.1, ::1, the bind
address, or RECHECK_DASHBOARD_HOSTS): a DNS-rebinding page (its own name pointed at this
machine) cannot read results and errors. A connection that sends nothing for IDLE_TIMEOUT is
closed, and one peer holds at most PER_PEER connections, so idle half-sent connections cannot
keep everyone else out; a health probe from a crowded address is still answered (BoundedServer).
"""

from __future__ import annotations

import hmac
import json
import logging
import threading
from collections import Counter
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import TypeVar
from urllib.parse import parse_qs, urlsplit

from recheck.dispatcher.monitor import Monitor
from recheck.shared.actions import ACTIONS, Actions
from recheck.shared.config import Workload
from recheck.shared.core.records import StatusFacts
from recheck.shared.mysql.db import Database, DatabaseDown
from recheck.shared.mysql.rows import Rows
from recheck.shared.mysql.schema import describe_table
from recheck.shared.redis.connection import REDIS_DOWN
from recheck.shared.views.rowstory import row_story
from recheck.shared.views.status import headline, shown_key

T = TypeVar("T")
log = logging.getLogger(__name__)


def page() -> bytes:
    return resources.files("recheck.dispatcher").joinpath("static", "dashboard.html").read_bytes()


ROW_LOOKUPS = 4  # row lookups at once (each a MySQL connection of its own): a flood cannot starve workers
LOOKUP_WAIT = 2.0  # seconds a lookup waits for its turn before the page is told to try again
REQUESTS = 64  # requests served at once (a thread each); more are turned away
ACTION_BODY_LIMIT = 65_536  # bytes of an action's JSON
ACTION_IDS = 1_000  # ids per action
BULK_ACTIONS = ("retry_dead", "discard_dead")  # every dead row of a workload (the dead jobs card)
IDLE_TIMEOUT = 5.0  # seconds a connection may wait between bytes of a request
PER_PEER = 16  # connections one address may hold at once
PROBES = 4  # connections over those bounds answered at once: 200 to /healthz, 503 to the rest
PROBE_TIMEOUT = 1.0  # seconds such a connection has to send its request line
LOOPBACK = ("localhost", "127.0.0.1", "::1")
WILDCARDS = ("", "0.0.0.0", "::")


class Dashboard:
    def __init__(self, monitors: list[Monitor], host: str, port: int, token: str = "", hosts: str = ""):
        self.monitors = {monitor.workload: monitor for monitor in monitors}
        self.host = host
        self.port = port
        self.token = token  # '' = read-only
        extra = [name.strip().lower() for name in hosts.split(",") if name.strip()]
        ours = [] if host in WILDCARDS else [host.lower()]
        self.hosts = frozenset([*LOOPBACK, *ours, *extra])
        self.server: ThreadingHTTPServer | None = None
        self.lookups = threading.BoundedSemaphore(ROW_LOOKUPS)

    def monitor(self, name: str | None) -> Monitor | None:
        """The named workload's monitor (the first workload's by default); None if unknown."""
        return self.monitors.get(name) if name else next(iter(self.monitors.values()))

    def status(self, name: str | None) -> dict | None:
        """One workload's sampled facts and history (the first workload's by default), and a
        line on every workload for the page's picker; None for an unknown workload."""
        monitor = self.monitor(name)
        if monitor is None:
            return None
        snapshot = monitor.snapshot()
        snapshot["title"] = monitor.title
        snapshot["workload"] = monitor.workload
        snapshot["actions"] = bool(self.token)
        snapshot["workloads"] = [
            {"name": name, "title": other.title, **summary(other.latest)}
            for name, other in self.monitors.items()
        ]
        return snapshot

    def row(self, name: str | None, key_text: str | None) -> tuple[HTTPStatus, dict]:
        """One row's story (what `recheck inspect` prints), for the page's search box."""
        monitor = self.monitor(name)
        if monitor is None or key_text is None:
            return HTTPStatus.NOT_FOUND, {"error": "say which row: /api/row?id=ID[&workload=NAME]"}
        workload, store = monitor.sampler.workload, monitor.sampler.store
        if not self.lookups.acquire(timeout=LOOKUP_WAIT):
            return HTTPStatus.SERVICE_UNAVAILABLE, {"error": "too many lookups at once; try again"}
        db = Database(workload, read_timeout=5.0)  # this request's own connection (at most ROW_LOOKUPS)
        try:
            keys = describe_table(workload, db).keys
            try:
                key = keys.from_text(key_text)
            except ValueError as error:
                return HTTPStatus.BAD_REQUEST, {"error": str(error)}
            story = row_story(workload, db, store, keys, key)
        except (DatabaseDown, *REDIS_DOWN) as error:
            return HTTPStatus.SERVICE_UNAVAILABLE, {"error": f"cannot look it up now: {error}"}
        finally:
            db.close()
            self.lookups.release()
        if story is None:
            return HTTPStatus.NOT_FOUND, {"error": f"no row with id {key_text!r} in {monitor.title}"}
        return HTTPStatus.OK, story.as_json()

    def names_us(self, host_header: str | None) -> bool:
        """Whether a request's Host header names this server (the port is not compared: a
        published port may differ from the one bound)."""
        if not host_header:
            return False
        host = urlsplit(f"//{host_header.strip()}").hostname or ""
        return host.lower() in self.hosts

    def allows(self, token: str | None) -> bool:
        if not self.token or token is None:
            return False
        return hmac.compare_digest(token.encode(), self.token.encode())  # no timing hints

    def act(self, request: dict, peer: str) -> tuple[HTTPStatus, dict]:
        """One action from the page: {"action", "ids", "workload"} -> what it did; or a bulk one,
        {"action": "retry_dead" | "discard_dead", "workload"[, "error"]} -> how many rows."""
        action, ids = request.get("action"), request.get("ids")
        if action in BULK_ACTIONS:
            return self.act_on_dead(request, peer)
        if action not in ACTIONS:
            return HTTPStatus.BAD_REQUEST, {"error": f"action must be one of {', '.join(ACTIONS)}"}
        if (
            not isinstance(ids, list)
            or not all(isinstance(row_id, str) for row_id in ids)
            or not (0 < len(ids) <= ACTION_IDS)
        ):
            return HTTPStatus.BAD_REQUEST, {"error": f"ids: a list of 1 to {ACTION_IDS} ids as text"}
        try:
            workload, acted = self.with_actions(request, 5.0, lambda actions: getattr(actions, action)(ids))
        except Refused as refused:
            return refused.status, refused.body
        done = [str(shown_key(key)) for key in acted.done]
        shown = ", ".join(ids[:20]) + (" ..." if len(ids) > 20 else "")
        log.warning("%sdashboard action %s from %s: ids %s (done %d, missing %d, left alone %d)",
                    workload.log_prefix, action, peer, shown, len(done), len(acted.missing),
                    len(acted.skipped))  # fmt: skip
        return HTTPStatus.OK, {
            "action": action,
            "done": done,
            "missing": [str(shown_key(key)) for key in acted.missing],
            "skipped": [str(shown_key(key)) for key in acted.skipped],
        }

    def act_on_dead(self, request: dict, peer: str) -> tuple[HTTPStatus, dict]:
        """Every dead row of the workload (whose last error contains "error", if given) retried or
        taken as done, as `recheck retry --all-dead` and `discard --all-dead` do."""
        action, error = request["action"], request.get("error")
        if request.get("ids") or not (error is None or (isinstance(error, str) and 0 < len(error) <= 255)):
            return HTTPStatus.BAD_REQUEST, {
                "error": f"{action}: no ids; error: a text of 1 to 255 characters"
            }

        def bulk(actions: Actions) -> int:
            return (actions.retry_dead if action == "retry_dead" else actions.discard_dead)(error)

        try:
            workload, count = self.with_actions(request, 60.0, bulk)
        except Refused as refused:
            return refused.status, refused.body
        log.warning("%sdashboard action %s from %s: %d dead rows%s", workload.log_prefix, action, peer, count,
                    f" whose error contains {error!r}" if error else "")  # fmt: skip
        return HTTPStatus.OK, {"action": action, "count": count}

    def with_actions(
        self, request: dict, read_timeout: float, work: Callable[[Actions], T]
    ) -> tuple[Workload, T]:
        """work(actions) on the request's workload, with a MySQL connection of its own and one of
        the lookup slots; (the workload, what work returned). Raises Refused with the answer."""
        monitor = self.monitor(request.get("workload"))
        if monitor is None:
            raise Refused(HTTPStatus.NOT_FOUND, {"error": f"no workload {request.get('workload')!r}"})
        workload = monitor.sampler.workload
        if not self.lookups.acquire(timeout=LOOKUP_WAIT):
            raise Refused(HTTPStatus.SERVICE_UNAVAILABLE, {"error": "too many requests at once; try again"})
        db = Database(workload, read_timeout=read_timeout)  # this request's own connection
        try:
            return workload, work(Actions(Rows(workload, db), lambda: monitor.sampler.store))
        except ValueError as error:  # an id the key column cannot hold
            raise Refused(HTTPStatus.BAD_REQUEST, {"error": str(error)}) from error
        except (DatabaseDown, *REDIS_DOWN) as error:
            raise Refused(HTTPStatus.SERVICE_UNAVAILABLE, {"error": f"not done: {error}"}) from error
        finally:
            db.close()
            self.lookups.release()
            monitor.wake()  # a row paused or released here shows in the next second's sample

    def start(self) -> bool:
        if not self.port:
            return False
        handler = type("DashboardHandler", (Handler,), {"dashboard": self})
        try:
            self.server = BoundedServer((self.host, self.port), handler)
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


class Refused(Exception):
    """An action the dashboard does not carry out: the status and the JSON body to answer."""

    def __init__(self, status: HTTPStatus, body: dict):
        super().__init__(body.get("error", ""))
        self.status, self.body = status, body


class BoundedServer(ThreadingHTTPServer):
    """A thread per request, but at most REQUESTS at once and PER_PEER per address: beyond that
    a connection goes to one of PROBES small threads that answer a health probe (GET /healthz)
    and turn anything else away with 503, or is closed unanswered when those are busy too. So a
    load balancer or kubelet probing from the address of a slow client (one NAT, one node) is
    still answered, within PROBE_TIMEOUT of its request."""

    request_queue_size = 128  # the kernel's accept queue: connections wait there, not in SYN retries

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.slots = threading.BoundedSemaphore(REQUESTS)
        self.probes = threading.BoundedSemaphore(PROBES)
        self.peers: Counter[str] = Counter()
        self.peers_lock = threading.Lock()

    def process_request(self, request, client_address) -> None:
        peer = client_address[0]
        with self.peers_lock:
            crowded = self.peers[peer] >= PER_PEER
            if not crowded:
                self.peers[peer] += 1
        if crowded or not self.slots.acquire(blocking=False):
            if not crowded:
                self.left(peer)
            if self.probes.acquire(blocking=False):
                threading.Thread(target=self.turn_away, args=(request,), daemon=True).start()
            else:
                self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def turn_away(self, request) -> None:
        """A connection over the bounds: 200 to a health probe, 503 to anything else."""
        try:
            request.settimeout(PROBE_TIMEOUT)
            head = b""
            while b"\r\n" not in head and len(head) < 1024:
                chunk = request.recv(1024)
                if not chunk:
                    break
                head += chunk
            words = head.split(b"\r\n", 1)[0].split()
            probe = (
                len(words) == 3
                and words[0] == b"GET"
                and urlsplit(words[1].decode("latin-1")).path == "/healthz"
            )
            status, body = (b"200 OK", b"ok\n") if probe else (b"503 Service Unavailable", b"busy\n")
            request.sendall(b"HTTP/1.1 " + status + b"\r\nContent-Type: text/plain\r\nContent-Length: "
                            + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)  # fmt: skip
        except OSError:
            pass  # slow or gone: it had its PROBE_TIMEOUT
        finally:
            self.shutdown_request(request)
            self.probes.release()

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()
            self.left(client_address[0])

    def left(self, peer: str) -> None:
        with self.peers_lock:
            self.peers[peer] -= 1
            if self.peers[peer] <= 0:
                del self.peers[peer]


def summary(facts: StatusFacts | None) -> dict:
    """What the workload picker shows of a workload: its state and headline."""
    if facts is None:
        return {"state": "unknown", "headline": "waiting for the first sample"}
    state = (
        "failing"
        if facts.fresh and facts.dead
        else ("fresh" if facts.fresh else "overdue" if facts.overdue_waiting else "failing")
    )
    return {"state": state, "headline": headline(facts)}


class Handler(BaseHTTPRequestHandler):
    dashboard: Dashboard
    server_version = "recheck"
    sys_version = ""
    timeout = IDLE_TIMEOUT  # socketserver applies it to the connection: an idle one is closed

    def host_refused(self) -> bool:
        """Answer 421 to a request that does not name this server (DNS rebinding); True if so.
        /healthz tells nothing, so answers any name (a probe may name the address it dialled)."""
        if self.dashboard.names_us(self.headers.get("Host")) or urlsplit(self.path).path == "/healthz":
            return False
        host = self.headers.get("Host")
        log.warning("dashboard request refused from %s: Host %r is not this server's name (add it "
                    "to RECHECK_DASHBOARD_HOSTS if it is)", self.address_string(), host)  # fmt: skip
        self.answer(HTTPStatus.MISDIRECTED_REQUEST, "this server does not answer to that Host name")
        return True

    def do_GET(self) -> None:
        if self.host_refused():
            return
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

    do_PUT = do_DELETE = do_PATCH = refuse

    def do_POST(self) -> None:
        if self.host_refused():
            return
        if urlsplit(self.path).path != "/api/action" or not self.dashboard.token:
            self.refuse()
            return
        problem = self.action_refused()
        if problem is not None:
            log.warning("dashboard action refused from %s: %s (%s)", self.address_string(), problem[1],
                        self.refused_ids())  # fmt: skip
            self.answer(*problem)
            return
        try:
            request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        except ValueError:
            self.answer(HTTPStatus.BAD_REQUEST, "the body is not JSON")
            return
        if not isinstance(request, dict):
            self.answer(HTTPStatus.BAD_REQUEST, 'the body must be {"action": ..., "ids": [...]}')
            return
        status, body = self.dashboard.act(request, self.address_string())
        self.reply(status, "application/json", json.dumps(body).encode())

    def refused_ids(self) -> str:
        """What a refused action asked for, for its log line: its action and ids (at most 20)
        when its body is a readable JSON action, else why they cannot be told."""
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit() or int(length) > ACTION_BODY_LIMIT:
            return "body not read"
        try:
            request = json.loads(self.rfile.read(int(length)))
            ids = [str(row_id) for row_id in request.get("ids", [])][:21]
        except (ValueError, AttributeError, TypeError, OSError):
            return "body not an action"
        shown = ", ".join(ids[:20]) + (" ..." if len(ids) > 20 else "")
        return f"action {str(request.get('action'))[:20]!r}, ids {shown or 'none'}"

    def action_refused(self) -> tuple[HTTPStatus, str] | None:
        """Why this POST may not act (None: it may)."""
        if not self.dashboard.allows(self.headers.get("X-Recheck-Token")):
            return HTTPStatus.FORBIDDEN, "a valid X-Recheck-Token header is needed"
        if (self.headers.get("Content-Type") or "").split(";")[0].strip() != "application/json":
            return HTTPStatus.UNSUPPORTED_MEDIA_TYPE, "send the action as application/json"
        origin = self.headers.get("Origin")
        if origin is not None and urlsplit(origin).netloc != self.headers.get("Host"):
            return HTTPStatus.FORBIDDEN, f"cross-origin request from {origin} refused"
        if self.headers.get("Sec-Fetch-Site", "same-origin") not in ("same-origin", "none"):
            return HTTPStatus.FORBIDDEN, "cross-site request refused"
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit() or int(length) > ACTION_BODY_LIMIT:
            return HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"send a Content-Length up to {ACTION_BODY_LIMIT}"
        return None

    def answer(self, status: HTTPStatus, error: str) -> None:
        self.reply(status, "application/json", json.dumps({"error": error}).encode())

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
