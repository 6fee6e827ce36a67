"""Daemon worker threads that never hold the process at exit (a wedged forward would), and a
record of calls abandoned by a timeout (:func:`abandoned`).
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

__all__ = ["Abandoned", "DaemonExecutor", "abandon", "abandoned", "model_threads"]


@dataclass(frozen=True)
class Abandoned:
    """A call whose caller gave up while it still ran on ``thread``."""

    what: str
    thread: str
    since: float  # time.monotonic() when it was given up on

    @property
    def seconds(self) -> float:
        """How long it has run since it was given up on."""
        return time.monotonic() - self.since


P = ParamSpec("P")
T = TypeVar("T")
_WorkItem = tuple[Future[Any], Callable[..., object], tuple[object, ...], dict[str, object]]


class DaemonExecutor(Executor):
    """Up to ``max_workers`` daemon threads, started as work arrives; exit never joins them."""

    def __init__(
        self,
        max_workers: int = 1,
        thread_name_prefix: str = "pytest-hud-worker",
        initializer: Callable[[], object] | None = None,
    ) -> None:
        if max_workers < 1:
            raise ValueError("max_workers must be >= 1")
        self._max = max_workers
        self._prefix = thread_name_prefix
        self._initializer = initializer
        self._work: queue.SimpleQueue[_WorkItem | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._lock = threading.Lock()
        self._shutdown = False
        self._running: dict[Future[object], str] = {}  # future -> the thread running it

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot submit to a DaemonExecutor after shutdown()")
            fut: Future[T] = Future()
            self._work.put((fut, fn, args, kwargs))
            if self._idle == 0 and len(self._threads) < self._max:
                name = f"{self._prefix}_{len(self._threads)}"
                thread = threading.Thread(target=self._worker, name=name, daemon=True)
                self._threads.append(thread)
                thread.start()
            return fut

    def thread_of(self, fut: Future[Any]) -> str | None:
        """The name of the thread running ``fut`` (None if it is not running here)."""
        return self._running.get(fut)

    def _worker(self) -> None:
        broken: BaseException | None = None
        if self._initializer is not None:
            try:
                self._initializer()
            except BaseException as exc:  # every call this worker takes fails with it
                broken = exc
        name = threading.current_thread().name
        while True:
            with self._lock:
                self._idle += 1
            item = self._work.get()
            with self._lock:
                self._idle -= 1
            if item is None:
                return
            fut, fn, args, kwargs = item
            if broken is not None:
                if fut.set_running_or_notify_cancel():
                    fut.set_exception(RuntimeError(f"{name}: its initializer failed: {broken!r}"))
            elif fut.set_running_or_notify_cancel():
                self._running[fut] = name
                try:
                    result = fn(*args, **kwargs)
                except BaseException as exc:
                    fut.set_exception(exc)
                else:
                    fut.set_result(result)
                finally:
                    self._running.pop(fut, None)
            del fut, fn, args, kwargs, item

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._shutdown = True
            if cancel_futures:
                while True:
                    try:
                        item = self._work.get_nowait()
                    except queue.Empty:
                        break
                    if item is not None:
                        item[0].cancel()
            for _ in self._threads:
                self._work.put(None)
        if wait:
            for thread in self._threads:
                if thread is not threading.current_thread():
                    thread.join()


_abandoned: dict[Future[object], Abandoned] = {}
_abandoned_lock = threading.Lock()


def abandon(fut: Future[Any], what: str, thread: str | None = None) -> None:
    """Record that the caller of ``fut`` (still running) gave up on it."""
    if fut.done():
        return
    entry = Abandoned(what, thread or "a worker thread", time.monotonic())
    with _abandoned_lock:
        _abandoned[fut] = entry

    def forget(done: Future[Any]) -> None:
        with _abandoned_lock:
            _abandoned.pop(done, None)

    fut.add_done_callback(forget)


def abandoned() -> list[Abandoned]:
    """Calls given up on that are still running, oldest first."""
    with _abandoned_lock:
        return sorted(_abandoned.values(), key=lambda a: a.since)


_model_threads: DaemonExecutor | None = None
_model_lock = threading.Lock()


def model_threads() -> DaemonExecutor:
    """The shared executor for models that name none (instead of asyncio's default one)."""
    global _model_threads
    with _model_lock:
        if _model_threads is None:
            workers = min(32, (os.cpu_count() or 1) + 4)  # ThreadPoolExecutor's default
            _model_threads = DaemonExecutor(workers, thread_name_prefix="pytest-hud-model")
        return _model_threads
