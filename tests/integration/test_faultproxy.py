"""The chaos tests' fault proxy (tests/support/faultproxy.py) against a TCP echo server and a real Redis."""

from __future__ import annotations

import contextlib
import os
import socket
import socketserver
import threading
import time

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from tests.support.faultproxy import FaultProxy
from tests.support.servers import RedisServer, free_port, wait_for


class EchoServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), EchoHandler)
        self.accepted = 0
        self.resets = 0  # connections the proxy closed on us with an RST

    @property
    def port(self) -> int:
        return self.server_address[1]


class EchoHandler(socketserver.BaseRequestHandler):
    server: EchoServer

    def handle(self) -> None:
        self.server.accepted += 1
        try:
            while data := self.request.recv(65536):
                self.request.sendall(data)
        except ConnectionResetError:
            self.server.resets += 1


@pytest.fixture
def echo():
    server = EchoServer()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def proxy(echo):
    with FaultProxy("127.0.0.1", echo.port) as proxy:
        yield proxy


def connect(proxy: FaultProxy, timeout: float = 2.0) -> socket.socket:
    return socket.create_connection(("127.0.0.1", proxy.port), timeout=timeout)


def recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(min(size - len(data), 1 << 16))
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} of {size} bytes")
        data += chunk
    return bytes(data)


def roundtrip(sock: socket.socket, data: bytes) -> bytes:
    sock.sendall(data)
    return recv_exactly(sock, len(data))


def assert_cut(sock: socket.socket) -> None:
    """The connection was closed on us: EOF or (with an RST) ConnectionResetError."""
    sock.settimeout(2)
    with contextlib.suppress(ConnectionResetError):
        assert sock.recv(1) == b""


def assert_cut_at_once(proxy: FaultProxy) -> None:
    """A new connection the proxy cuts right away: the RST can even beat connect() returning."""
    try:
        sock = connect(proxy)  # the kernel completes the handshake before the proxy's accept
    except ConnectionResetError:
        return
    with sock:
        assert_cut(sock)


def test_forwards_both_ways_and_counts(proxy, echo):
    payloads = [os.urandom(16 * 1024), os.urandom(3000)]
    socks = [connect(proxy) for _ in payloads]
    for sock, payload in zip(socks, payloads, strict=True):
        assert roundtrip(sock, payload) == payload
    assert proxy.connections_total == 2
    assert proxy.connections_open == 2
    total = sum(map(len, payloads))
    assert proxy.bytes_to_target == proxy.bytes_to_client == total

    # Backpressure: 4 MB streamed through while read back concurrently.
    big = os.urandom(4 << 20)
    sender = threading.Thread(target=socks[0].sendall, args=(big,))
    sender.start()
    assert recv_exactly(socks[0], len(big)) == big
    sender.join()

    for sock in socks:
        sock.close()
    wait_for(lambda: proxy.connections_open == 0, 2, "the proxy to close both pairs")
    assert proxy.bytes_to_client == total + len(big)


def test_unreachable_target_closes_the_client():
    with FaultProxy("127.0.0.1", free_port()) as proxy:
        assert_cut_at_once(proxy)
        wait_for(lambda: proxy.connections_open == 0, 2, "the pair to be dropped")


def test_latency_delays_each_direction_without_serialising(proxy):
    with connect(proxy) as sock:
        proxy.set_latency(0.15)
        started = time.monotonic()
        assert roundtrip(sock, b"ping") == b"ping"
        elapsed = time.monotonic() - started
        assert 0.3 <= elapsed < 1.0, elapsed  # 0.15 s each way

        # Ten chunks sent 20 ms apart: each delayed 0.3 s, not one after another (3 s).
        started = time.monotonic()
        messages = [f"message {n};".encode() for n in range(10)]
        for message in messages:
            sock.sendall(message)
            time.sleep(0.02)  # pacing, so the chunks travel separately
        assert recv_exactly(sock, sum(map(len, messages))) == b"".join(messages)  # in order
        elapsed = time.monotonic() - started
        assert 0.3 <= elapsed < 1.2, elapsed

        proxy.set_latency(0)
        started = time.monotonic()
        assert roundtrip(sock, b"fast") == b"fast"
        assert time.monotonic() - started < 0.25  # it was >= 0.3 with latency


def test_stall_holds_everything_until_unstall(proxy, echo):
    with connect(proxy) as old:
        assert roundtrip(old, b"before") == b"before"
        proxy.stall()
        old.settimeout(0.3)
        old.sendall(b"during")
        with pytest.raises(TimeoutError):
            old.recv(100)

        # A new connection is accepted, but the target does not see it before unstall.
        with connect(proxy) as new:
            new.sendall(b"new")
            new.settimeout(0.3)
            with pytest.raises(TimeoutError):
                new.recv(100)
            assert echo.accepted == 1

            proxy.unstall()
            old.settimeout(2)
            new.settimeout(2)
            assert recv_exactly(old, 6) == b"during"
            assert recv_exactly(new, 3) == b"new"
            assert echo.accepted == 2


def test_stall_does_not_read_so_writers_block(proxy):
    with connect(proxy) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
        proxy.stall()
        sock.setblocking(False)
        sent, chunk = 0, b"x" * 65536
        with pytest.raises(BlockingIOError):  # the kernel buffers fill: the proxy does not drain them
            while sent < 64 << 20:
                sent += sock.send(chunk)
        assert sent < 64 << 20
        proxy.unstall()
        sock.settimeout(5)
        assert recv_exactly(sock, sent) == b"x" * sent


def test_reset_cuts_open_connections_with_rst(proxy, echo):
    socks = [connect(proxy) for _ in range(2)]
    for sock in socks:
        assert roundtrip(sock, b"hello") == b"hello"
    proxy.reset()
    for sock in socks:
        with pytest.raises(ConnectionResetError):
            roundtrip(sock, b"again")
        sock.close()
    wait_for(lambda: echo.resets == 2, 2, "the target side to be reset too")
    assert proxy.connections_open == 0

    with connect(proxy) as sock:
        assert roundtrip(sock, b"new") == b"new"
    assert proxy.connections_total == 3


def test_refuse_cuts_new_connections_only(proxy):
    with connect(proxy) as old:
        assert roundtrip(old, b"a") == b"a"
        proxy.refuse()
        assert_cut_at_once(proxy)
        assert roundtrip(old, b"still") == b"still"
        assert proxy.connections_refused == 1

        proxy.refuse(False)
        with connect(proxy) as new:
            assert roundtrip(new, b"back") == b"back"
        assert proxy.connections_total == 2


def test_through_redis(tmp_path):
    server = RedisServer(tmp_path / "redis")
    server.start()
    clients: list[redis.Redis] = []

    def client(proxy: FaultProxy) -> redis.Redis:
        # One connection, no retries: a pool would silently reconnect and hide the faults.
        made = redis.Redis(
            host="127.0.0.1",
            port=proxy.port,
            socket_timeout=0.5,
            socket_connect_timeout=0.5,
            retry=Retry(NoBackoff(), 0),
            single_connection_client=True,
        )
        clients.append(made)
        return made

    try:
        with FaultProxy("127.0.0.1", server.port) as proxy:
            stalled = client(proxy)
            assert stalled.ping()
            proxy.stall()
            started = time.monotonic()
            with pytest.raises(redis.TimeoutError):
                stalled.ping()
            assert time.monotonic() - started < 2

            proxy.heal()
            assert client(proxy).ping()

            proxy.refuse()
            started = time.monotonic()
            with pytest.raises(redis.ConnectionError):
                client(proxy).ping()
            assert time.monotonic() - started < 0.4  # refused, not timed out
            proxy.refuse(False)

            connected = client(proxy)
            assert connected.ping()
            proxy.reset()
            with pytest.raises(redis.ConnectionError):
                connected.ping()
            assert client(proxy).set("after", "reset")
            assert server.client().get("after") == b"reset"
    finally:
        for made in clients:
            made.close()
        server.kill()
