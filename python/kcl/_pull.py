"""kcl.PullConsumer: iterate a stream's records and acknowledge each when done, from any
thread and in any order; the checkpoints follow each shard's low watermark."""
from __future__ import annotations

import collections
import contextlib
import signal
from typing import Any, AsyncIterator, Deque, Dict, Iterator, List, Optional

from . import _kcl
from ._kcl import PulledRecord
from ._lifecycle import Consumer, sigterm_calls, track
from ._stats import PullStats


class PullConsumer(Consumer):
    """A kcl-cpp pull consumer in this process.

        with kcl.PullConsumer(stream="orders", app="order-audit") as consumer:
            for record in consumer:                 # until Ctrl-C / SIGTERM / shutdown()
                pool.submit(handle, record)         # handle() calls record.ack() when done

    Records of one shard come in shard order; acknowledge each exactly once (``ack()``), from
    any thread. A record taken but never acknowledged holds its shard's checkpoint back and is
    delivered again after a restart or a lease lost (at-least-once). A graceful move of a
    shard's lease (the leader hands it to another worker, or shutdown()) first waits, bounded,
    for that shard's records taken to be acknowledged, so it delivers nothing twice. Options:
    those of
    kcl.Worker plus ``max_unacked_per_shard``, ``max_unacked_bytes_per_shard``,
    ``checkpoint_interval``, ``stuck_record_warning``, ``shutdown_ack_timeout``.
    """

    def __init__(self, stream: Optional[str] = None, app: Optional[str] = None,
                 **options: Any) -> None:
        self._core: _kcl._PullConsumer = _kcl._PullConsumer(dict(options, stream=stream, app=app))
        # Records taken by a poll whose awaiting task was cancelled (async iteration): handed
        # out first by the next call, so none is taken and left unacknowledged.
        self._kept: Deque[PulledRecord] = collections.deque()
        track(self)

    def next(self, timeout: Optional[float] = None) -> Optional[PulledRecord]:
        """The next record, waiting up to `timeout` seconds (None: until one comes or the
        consumer stops); None on timeout and once the consumer is stopping. SIGTERM (on the
        main thread) begins a graceful stop while it waits."""
        if self._kept:
            return self._kept.popleft()
        with sigterm_calls(self.begin_shutdown):
            return self._core.next(timeout)

    def next_batch(self, max_records: int = 500, timeout: float = 1.0) -> List[PulledRecord]:
        """Up to `max_records` records (at least one unless `timeout` passes first)."""
        kept: List[PulledRecord] = []
        while self._kept and len(kept) < max_records:
            kept.append(self._kept.popleft())
        if kept:
            return kept
        with sigterm_calls(self.begin_shutdown):
            return self._core.next_batch(max_records, timeout)

    def stats(self) -> PullStats:
        """The consumer's figures (kcl.PullStats)."""
        return PullStats._from_core(self._core.stats())

    def __iter__(self) -> Iterator[PulledRecord]:
        """Records until the consumer stops. SIGTERM (on the main thread) begins a graceful
        stop; Ctrl-C raises KeyboardInterrupt out of the loop (the with-block's exit, or
        shutdown(), then stops gracefully)."""
        with sigterm_calls(self.begin_shutdown):
            while True:
                r = self._kept.popleft() if self._kept else self._core.next(None)
                if r is None:
                    return
                yield r

    def __aiter__(self) -> AsyncIterator[PulledRecord]:
        return self._records_async()

    async def _records_async(self) -> AsyncIterator[PulledRecord]:
        import asyncio  # here: it costs a third of `import kcl`
        loop = asyncio.get_running_loop()
        with _async_sigterm_calls(loop, self.begin_shutdown):
            while True:
                if self._kept:
                    yield self._kept.popleft()
                    continue
                poll = loop.run_in_executor(None, self._core.next, 0.2)
                try:
                    # Shielded: a cancelled iteration (asyncio.wait_for, a timeout, Ctrl-C)
                    # cannot stop the poll's thread, which may still take a record; that
                    # record is kept for the next call instead of dropped unacknowledged.
                    r = await asyncio.shield(poll)
                except asyncio.CancelledError:
                    poll.add_done_callback(self._keep_taken)
                    raise
                if r is not None:
                    yield r
                elif self._core.stopping():
                    return

    def _keep_taken(self, poll: Any) -> None:
        if not poll.cancelled() and poll.exception() is None and poll.result() is not None:
            self._kept.append(poll.result())

    def shutdown(self) -> None:
        """Graceful stop: no more records; each shard waits up to ``shutdown_ack_timeout``
        for its records taken and not acknowledged, checkpoints its watermark and hands its
        lease back (as at a handoff). Blocks until done; other threads may go on acking."""
        self._core.shutdown()

    def wait(self) -> None:
        """Blocks until the consumer stopped (Ctrl-C and SIGTERM begin a graceful stop)."""
        with sigterm_calls(self.begin_shutdown):
            self._core.wait()


@contextlib.contextmanager
def _async_sigterm_calls(loop: Any, stop: Any) -> Iterator[None]:
    """While the block runs, SIGTERM calls `stop` through the event loop (where the loop
    takes signals: the main thread, not on Windows)."""
    try:
        loop.add_signal_handler(signal.SIGTERM, stop)
    except (NotImplementedError, RuntimeError, ValueError):
        yield
        return
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


def pull_options() -> List[str]:
    """The option names kcl.PullConsumer accepts."""
    return sorted(_kcl.pull_option_names())
