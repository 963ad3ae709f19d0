"""A small TCP fault-injection proxy for chaos tests, in the spirit of Shopify's Toxiproxy.

`FaultProxy(host, port)` listens on 127.0.0.1:`proxy.port` and forwards every connection to
host:port, both directions, from an asyncio loop in a daemon thread. Faults can be switched at any
time from ordinary test code; each control method returns once the fault is in effect:

- `set_latency(s)`: a slow network. Every chunk, in either direction, is held `s` seconds after
  it was read (order kept, delays not serialised: throughput stays, only the delay is added).
- `stall()` / `unstall()`: a partition where packets are silently dropped. Nothing is read from
  any socket, so peers' reads hang (until their own timeouts) and their writes fill buffers; the
  connections stay open. New connections are accepted but are connected to the target only at
  unstall, so the target sees nothing meanwhile. At unstall, whatever the peers wrote meanwhile
  (held in kernel buffers) is forwarded, as after a partition that heals before TCP gives up.
- `reset()`: connections cut (a middlebox or peer restart): every open connection is closed with
  a TCP RST on both sides. New connections work normally.
- `refuse()`: the server or port went away: new connections are reset right after accept (the
  connect itself succeeds, the first read or write fails). Open connections are untouched.
- `heal()`: all of the above off.

Use in a test: point a process at the proxy instead of the server, e.g. RECHECK_REDIS_URL=
redis://127.0.0.1:{proxy.port}/0 or RECHECK_MYSQL_URL=mysql://root@127.0.0.1:{proxy.port}/db:

    with FaultProxy("127.0.0.1", redis_server.port) as proxy:
        ...start the worker against proxy.port...
        proxy.stall(); ...assert it notices...; proxy.heal()
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

BACKLOG = 1 << 20  # bytes held for one side before we stop reading the other (bounded memory)
CLOCK_RESOLUTION = time.get_clock_info("monotonic").resolution  # as asyncio's timers use it


def _reset(transport: asyncio.BaseTransport | None) -> None:
    """Close abruptly: SO_LINGER on with a 0 s timeout makes close() send RST instead of FIN."""
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


class _End(asyncio.Protocol):
    """One socket of a proxied connection. What it reads is queued on its peer, which writes
    the chunks to its own socket once they are due (latency) and while not stalled."""

    def __init__(self, proxy: FaultProxy, counter: str, client: _End | None = None) -> None:
        self.proxy = proxy
        self.counter = counter  # the proxy attribute counting bytes written to this socket
        self.client = client or self  # identifies the pair
        self.peer: _End = self
        self.transport: asyncio.Transport | None = None
        self.queue: deque[tuple[float, bytes]] = deque()  # (due time, chunk) to write here
        self.queued = 0
        self.timer: asyncio.TimerHandle | None = None
        self.write_paused = False  # our transport's buffer is full
        self.eof = False  # the peer is gone: close once the queue is written

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        proxy = self.proxy
        if self.client is self:
            if proxy._refusing:
                proxy.connections_refused += 1
                _reset(transport)
                return
            proxy.connections_total += 1
            task = proxy._loop.create_task(proxy._connect(self.peer))
            proxy._tasks.add(task)
            task.add_done_callback(proxy._tasks.discard)
        proxy._ends.add(self)
        self.update_reading()
        self.peer.update_reading()
        self.flush()

    def data_received(self, data: bytes) -> None:
        self.peer.push(data)

    def connection_lost(self, exc: Exception | None) -> None:
        # EOF lands here too (asyncio closes on EOF): a half-close becomes a full close.
        self.proxy._ends.discard(self)
        if self.timer:
            self.timer.cancel()
        self.queue.clear()
        self.queued = 0
        self.peer.eof = True
        self.peer.flush()

    def pause_writing(self) -> None:
        self.write_paused = True
        self.peer.update_reading()

    def resume_writing(self) -> None:
        self.write_paused = False
        self.peer.update_reading()

    def push(self, data: bytes) -> None:
        now = self.proxy._loop.time()
        due = max(now + self.proxy._latency, self.queue[-1][0] if self.queue else now)  # keep order
        self.queue.append((due, data))
        self.queued += len(data)
        self.flush()

    def flush(self) -> None:
        """Write the chunks that are due; come back when the next one is."""
        if self.timer:
            self.timer.cancel()
            self.timer = None
        transport = self.transport
        if transport is None or transport.is_closing() or self.proxy._stalled:
            return
        now = self.proxy._loop.time() + CLOCK_RESOLUTION
        while self.queue and self.queue[0][0] <= now:
            data = self.queue.popleft()[1]
            self.queued -= len(data)
            transport.write(data)
            setattr(self.proxy, self.counter, getattr(self.proxy, self.counter) + len(data))
        if self.queue:
            self.timer = self.proxy._loop.call_at(self.queue[0][0], self.flush)
        elif self.eof:
            transport.close()  # after its buffer is written
        self.peer.update_reading()

    def update_reading(self) -> None:
        """Read only while not stalled and the peer is connected and keeping up."""
        transport, peer = self.transport, self.peer
        if transport is None or transport.is_closing():
            return
        if self.proxy._stalled or peer.transport is None or peer.write_paused or peer.queued > BACKLOG:
            transport.pause_reading()
        else:
            transport.resume_reading()


class FaultProxy:
    def __init__(self, target_host: str, target_port: int, listen_port: int | None = None) -> None:
        self.target_host, self.target_port = target_host, target_port
        self.port = listen_port or 0  # the real port once started
        self.connections_total = 0  # accepted and forwarded (refused ones are not counted)
        self.connections_refused = 0
        self.bytes_to_target = 0  # forwarded client -> target
        self.bytes_to_client = 0  # forwarded target -> client
        self._latency = 0.0
        self._stalled = False
        self._refusing = False
        self._flowing = asyncio.Event()  # set while not stalled
        self._flowing.set()
        self._ends: set[_End] = set()  # ends with an open socket
        self._tasks: set[asyncio.Task] = set()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="faultproxy", daemon=True)
        self._server: asyncio.Server | None = None

    def start(self) -> FaultProxy:
        """Listen (on .port) and return once connections are accepted."""
        self._thread.start()
        try:
            self._server = self._call_async(self._listen())
        except BaseException:  # e.g. the port is taken: do not leave the thread behind
            self.close()
            raise
        return self

    async def _listen(self) -> asyncio.Server:
        server = await self._loop.create_server(self._accept, "127.0.0.1", self.port)
        self.port = server.sockets[0].getsockname()[1]
        return server

    def _accept(self) -> _End:
        client = _End(self, "bytes_to_client")
        client.peer = _End(self, "bytes_to_target", client)
        client.peer.peer = client
        return client

    async def _connect(self, target: _End) -> None:
        await self._flowing.wait()  # a connection made during a stall reaches the target at unstall
        if target.eof:  # the client left meanwhile
            return
        try:
            await asyncio.wait_for(
                self._loop.create_connection(lambda: target, self.target_host, self.target_port), 10
            )
        except OSError:  # TimeoutError included
            _reset(target.peer.transport)  # target unreachable: the client sees its connection die

    def close(self) -> None:
        """Stop listening, drop every connection, stop the thread. Idempotent."""
        if self._thread.is_alive():
            self._call_async(self._shutdown())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
        if not self._loop.is_closed():
            self._loop.close()

    async def _shutdown(self) -> None:
        if self._server:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        for end in list(self._ends):
            end.transport.abort()  # type: ignore[union-attr]
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await asyncio.sleep(0)  # let the transports' connection_lost callbacks close the sockets

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _call_async(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=10)

    def _call(self, function: Callable[[], Any]) -> Any:
        """Run function on the loop thread and wait, so a fault is in effect once we return."""

        async def run() -> Any:
            return function()

        return self._call_async(run())

    # Faults

    def set_latency(self, seconds: float) -> None:
        """Delay every chunk read from now on by `seconds` (either direction); 0 turns it off."""
        self._call(lambda: setattr(self, "_latency", max(0.0, seconds)))

    def stall(self) -> None:
        """Stop reading every socket; new connections wait for unstall to reach the target."""
        self._call(lambda: self._set_stalled(True))

    def unstall(self) -> None:
        """Resume reading and forwarding; held chunks and connections go through."""
        self._call(lambda: self._set_stalled(False))

    def _set_stalled(self, stalled: bool) -> None:
        self._stalled = stalled
        (self._flowing.clear if stalled else self._flowing.set)()
        for end in list(self._ends):
            end.update_reading()
            end.flush()

    def reset(self) -> None:
        """RST every open connection, both sides; the RSTs are sent when this returns."""

        async def reset() -> None:
            for end in list(self._ends):
                _reset(end.transport)
            await asyncio.sleep(0)  # abort() closes the socket in a callback: let it run

        self._call_async(reset())

    def refuse(self, on: bool = True) -> None:
        """While on, RST new connections right after accept."""
        self._call(lambda: setattr(self, "_refusing", on))

    def heal(self) -> None:
        """No latency, no stall, no refusal."""

        def heal() -> None:
            self._latency = 0.0
            self._refusing = False
            self._set_stalled(False)

        self._call(heal)

    @property
    def connections_open(self) -> int:
        """Proxied connections with at least one side still open."""
        if not self._thread.is_alive():
            return 0
        return self._call(lambda: len({end.client for end in self._ends}))
