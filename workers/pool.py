"""A thread pool whose threads never keep the process alive.

concurrent.futures.ThreadPoolExecutor joins its threads at interpreter exit, so one check
stuck in a socket read forever would stop a worker from ever exiting. Checks run here
instead: an abandoned (timed-out) check's thread is left behind and dies with the process.
"""

from __future__ import annotations

import concurrent.futures
import queue
import threading


class DaemonPool(concurrent.futures.Executor):
    def __init__(self, size: int, name: str = "check"):
        self.size = size
        self.name = name
        self._tasks: queue.SimpleQueue = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, fn, /, *args, **kwargs) -> concurrent.futures.Future:
        if self._closed:
            raise RuntimeError("pool is shut down")
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._lock:
            self._tasks.put((future, fn, args, kwargs))
            if self._idle == 0 and len(self._threads) < self.size:
                thread = threading.Thread(
                    target=self._serve, name=f"{self.name}-{len(self._threads)}", daemon=True
                )
                self._threads.append(thread)
                thread.start()
            else:
                self._idle -= 1
        return future

    def grow(self, threads: int) -> None:
        """Allow this many more threads (negative: fewer), e.g. in place of one lost to a hung task."""
        with self._lock:
            self.size += threads

    def _serve(self) -> None:
        while True:
            task = self._tasks.get()
            if task is None:
                return
            future, fn, args, kwargs = task
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args, **kwargs))
                except BaseException as error:  # handed to whoever waits on the future
                    future.set_exception(error)
            with self._lock:
                self._idle += 1

    def shutdown(self, wait: bool = False, *, cancel_futures: bool = False) -> None:
        """Stop taking work; idle threads end, busy ones finish (or die with the process)."""
        self._closed = True
        if cancel_futures:
            while True:
                try:
                    task = self._tasks.get_nowait()
                except queue.Empty:
                    break
                if task is not None:
                    task[0].cancel()
        for _ in self._threads:
            self._tasks.put(None)
