"""kcl.PullConsumer: iterate a stream's records and acknowledge each when done, from any
thread and in any order; the checkpoints follow each shard's low watermark."""
from __future__ import annotations

import signal
from typing import Any, AsyncIterator, Dict, Iterator, List, Optional

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
        # Async iteration: the poll in flight, when the step awaiting it was cancelled (the
        # next step awaits it instead of starting another: its record is not dropped, and the
        # records of a shard keep their order); and the iterations under way, with whether
        # the first installed the SIGTERM handler.
        self._poll: Any = None
        self._async_iterations = 0
        self._async_sigterm = False
        track(self)

    def next(self, timeout: Optional[float] = None) -> Optional[PulledRecord]:
        """The next record, waiting up to `timeout` seconds (None: until one comes or the
        consumer stops); None on timeout and once the consumer is stopping. SIGTERM (on the
        main thread) begins a graceful stop while it waits."""
        with sigterm_calls(self.begin_shutdown):
            return self._core.next(timeout)

    def next_batch(self, max_records: int = 500, timeout: float = 1.0) -> List[PulledRecord]:
        """Up to `max_records` records (at least one unless `timeout` passes first)."""
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
                r = self._core.next(None)
                if r is None:
                    return
                yield r

    def __aiter__(self) -> AsyncIterator[PulledRecord]:
        return self._records_async()

    async def _records_async(self) -> AsyncIterator[PulledRecord]:
        import asyncio  # here: it costs a third of `import kcl`
        loop = asyncio.get_running_loop()
        self._begin_async_iteration(loop)
        try:
            while True:
                poll = self._poll
                if poll is None or poll.get_loop() is not loop:
                    poll = self._poll = loop.run_in_executor(None, self._core.next, 0.2)
                # Shielded: a cancelled step (asyncio.wait_for, a timeout, Ctrl-C) cannot stop
                # the poll's thread, which may still take a record; the poll stays in
                # self._poll, and the next step takes its record.
                r = await asyncio.shield(poll)
                self._poll = None
                if r is not None:
                    yield r
                elif self._core.stopping():
                    return
        finally:
            self._end_async_iteration(loop)

    def _begin_async_iteration(self, loop: Any) -> None:
        """SIGTERM begins a graceful stop while an async iteration runs, through the loop,
        where the loop takes signals (its thread is the main one) and nothing else handles
        SIGTERM yet: an application's own handler is left alone."""
        self._async_iterations += 1
        if self._async_iterations > 1 or signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
            return
        try:
            loop.add_signal_handler(signal.SIGTERM, self.begin_shutdown)
            self._async_sigterm = True
        except (NotImplementedError, RuntimeError, ValueError):
            pass

    def _end_async_iteration(self, loop: Any) -> None:
        self._async_iterations -= 1
        if self._async_iterations == 0 and self._async_sigterm:
            self._async_sigterm = False
            try:
                loop.remove_signal_handler(signal.SIGTERM)  # back to SIG_DFL, as found
            except (NotImplementedError, RuntimeError, ValueError):
                pass

    def shutdown(self) -> None:
        """Graceful stop: no more records; each shard waits up to ``shutdown_ack_timeout``
        for its records taken and not acknowledged, checkpoints its watermark and hands its
        lease back (as at a handoff). Blocks until done; other threads may go on acking."""
        self._core.shutdown()

    def wait(self) -> None:
        """Blocks until the consumer stopped (Ctrl-C and SIGTERM begin a graceful stop)."""
        with sigterm_calls(self.begin_shutdown):
            self._core.wait()


def pull_options() -> List[str]:
    """The option names kcl.PullConsumer accepts."""
    return sorted(_kcl.pull_option_names())
