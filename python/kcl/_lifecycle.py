"""What Worker, PullConsumer and Producer share: stopping on SIGTERM and at interpreter exit."""
from __future__ import annotations

import atexit
import contextlib
import signal
import threading
import weakref
from typing import Any, Callable, Iterator, TypeVar, Union

from . import _kcl

T = TypeVar("T", bound="Consumer")

_live: "weakref.WeakSet[Any]" = weakref.WeakSet()


def track(obj: Any) -> None:
    """Stops `obj` (obj._stop_at_exit()) when the interpreter exits, if still running: the
    core's threads must be gone before Python finalizes."""
    _live.add(obj)


@atexit.register
def _stop_all() -> None:
    for obj in list(_live):
        try:
            obj._stop_at_exit()
        except Exception:  # noqa: BLE001 - exiting anyway; the core logged why
            pass


@contextlib.contextmanager
def sigterm_calls(stop: Callable[[], None]) -> Iterator[None]:
    """While the block runs, SIGTERM calls `stop` (a graceful stop) instead of killing the
    process; only on the main thread (Python runs signal handlers there only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, lambda signum, frame: stop())
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class Consumer:
    """What kcl.Worker and kcl.PullConsumer have in common, over their core (self._core)."""

    _core: Union[_kcl._Worker, _kcl._PullConsumer]

    def start(self) -> None:
        """Prepares the lease table and starts the threads; returns once running."""
        self._core.start()

    def begin_shutdown(self) -> None:
        """Begins the graceful stop and returns at once (safe from any thread)."""
        self._core.begin_shutdown()

    @property
    def worker_id(self) -> str:
        return self._core.worker_id

    @property
    def http_url(self) -> str:
        """The HTTP endpoint's base URL when ``http_address`` is set (after start)."""
        return self._core.http_url

    def __enter__(self: T) -> T:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._core.shutdown()

    def _stop_at_exit(self) -> None:
        self._core.shutdown()
