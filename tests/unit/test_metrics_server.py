"""The processes' /metrics server (shared/process/metrics.py serve): it answers scrapes, reports a
port in use without failing, and its loop sleeps between them. prometheus_client's own server
polled every 0.5 s: two wake-ups a second in every idle recheck process."""

from __future__ import annotations

import socket
import threading
import time
import urllib.request

from prometheus_client import CollectorRegistry, Counter

from recheck.shared.process.metrics import serve
from tests.support.servers import free_port, wait_for


def voluntary_switches(thread: threading.Thread) -> int:
    with open(f"/proc/self/task/{thread.native_id}/status") as status:
        line = next(line for line in status if line.startswith("voluntary_ctxt_switches:"))
    return int(line.split()[1])


def waiting(thread: threading.Thread) -> bool:
    """The thread woke for nothing in the last 0.1 s (the scrape's accept is over)."""
    before = voluntary_switches(thread)
    time.sleep(0.1)
    return voluntary_switches(thread) == before


def test_the_metrics_server_answers_and_sleeps_between_scrapes():
    registry = CollectorRegistry()
    Counter("recheck_probe_total", "a counter for this test", registry=registry).inc(3)
    port = free_port()
    before = set(threading.enumerate())
    assert serve("127.0.0.1", port, registry)
    (thread,) = [t for t in threading.enumerate() if t not in before]
    assert thread.name == "metrics" and thread.daemon
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        assert reply.status == 200 and "recheck_probe_total 3.0" in reply.read().decode()
    wait_for(lambda: waiting(thread), 5, "the server's loop back in its wait after the scrape")
    woken = voluntary_switches(thread)
    time.sleep(1.5)  # the window: three polls of prometheus_client's server
    assert voluntary_switches(thread) - woken == 0
    assert not serve("127.0.0.1", port, registry)  # in use: said once, not fatal


def test_the_metrics_server_listens_on_an_ipv6_address_where_the_machine_has_one():
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return  # no IPv6 loopback here: nothing to show
    port = free_port()
    assert serve("::1", port, CollectorRegistry())
    with urllib.request.urlopen(f"http://[::1]:{port}/metrics", timeout=5) as reply:
        assert reply.status == 200
