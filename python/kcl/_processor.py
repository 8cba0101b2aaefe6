"""The record processor API (kcl.RecordProcessor) and its adapter to the extension module."""
from __future__ import annotations

import logging
import traceback
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence, Tuple

if TYPE_CHECKING:
    from ._kcl import Checkpointer, RecordBatch

_log = logging.getLogger("kcl.processor")


class InitializationInput:
    """What a processor learns when its shard starts (RecordProcessor.initialize).

    ``sequence_number``/``sub_sequence_number``: where delivery starts (the stored checkpoint,
    or a sentinel such as "TRIM_HORIZON" or "LATEST" for a new shard). ``pending_checkpoint``:
    a two-phase checkpoint found prepared, as (sequence_number, sub_sequence_number), and
    ``pending_checkpoint_state`` its application state; both None when there is none.
    """

    __slots__ = ("shard_id", "stream_name", "sequence_number", "sub_sequence_number",
                 "pending_checkpoint", "pending_checkpoint_state")

    shard_id: str
    stream_name: str
    sequence_number: str
    sub_sequence_number: int
    pending_checkpoint: Optional[Tuple[str, int]]
    pending_checkpoint_state: Optional[str]

    def __init__(self, shard_id: str, stream_name: str, sequence_number: str,
                 sub_sequence_number: int, pending_checkpoint: Optional[Tuple[str, int]],
                 pending_checkpoint_state: Optional[str]) -> None:
        self.shard_id = shard_id
        self.stream_name = stream_name
        self.sequence_number = sequence_number
        self.sub_sequence_number = sub_sequence_number
        self.pending_checkpoint = pending_checkpoint
        self.pending_checkpoint_state = pending_checkpoint_state

    def __repr__(self) -> str:
        return ("kcl.InitializationInput(shard_id=%r, stream_name=%r, sequence_number=%r, "
                "sub_sequence_number=%r)" % (self.shard_id, self.stream_name,
                                             self.sequence_number, self.sub_sequence_number))


class RecordProcessor:
    """Processes the records of one shard. Subclass it and give kcl.Worker a factory.

    The worker calls, for each shard lease it holds: ``initialize`` once, then
    ``process_records`` for each batch (in shard order), then exactly one of ``lease_lost``
    (another worker took the shard: do not checkpoint), ``shard_ended`` (the shard was read to
    its end: checkpoint, or its children never start) and ``shutdown_requested`` (the worker
    is stopping: checkpoint what was processed).

    Calls for one shard never overlap but may come from different threads; processors of
    different shards run at the same time (the GIL is held only while Python code runs).

    An exception raised by ``process_records`` makes the worker deliver the same batch again
    after a backoff (``on_processor_error="retry"``, the default) or, with
    ``on_processor_error="skip"``, skip it after ``max_attempts_before_skip`` failures, or,
    with ``on_processor_error="dead_letter"`` and ``dead_letter_file=PATH``, bisect it and
    write each record that keeps failing to that JSON-lines file (see docs/worker.md); its
    traceback is logged once per series of failures (logger "kcl.processor").
    """

    def initialize(self, input: InitializationInput) -> None:  # noqa: A002
        """The shard starts; ``input`` says where delivery begins."""

    def process_records(self, records: "RecordBatch", checkpointer: "Checkpointer") -> None:
        """A batch of records (a kcl.RecordBatch: a read-only sequence of kcl.Record) in shard
        order; checkpoint with ``checkpointer``. Keep ``list(records)`` to hold on to them."""
        raise NotImplementedError("RecordProcessor.process_records must be overridden")

    def lease_lost(self) -> None:
        """Another worker holds the shard now; do not checkpoint (it would be refused)."""

    def shard_ended(self, checkpointer: "Checkpointer") -> None:
        """The shard was read to its end. Checkpoints (SHARD_END) by default; an override must
        call ``checkpointer.checkpoint()`` too, or the shard's children never start."""
        checkpointer.checkpoint()

    def shutdown_requested(self, checkpointer: "Checkpointer") -> None:
        """The worker is stopping: checkpoint what has been processed."""


class ProcessorAdapter:
    """Calls one application processor for the extension module and turns what it raises
    into a one-line failure (the traceback is logged once per series)."""

    __slots__ = ("_processor", "_shard_id", "_failure", "_failures")

    def __init__(self, processor: RecordProcessor, shard_id: str) -> None:
        self._processor = processor
        self._shard_id = shard_id
        self._failure: Optional[Tuple[str, str]] = None  # (callback, traceback) of the series
        self._failures = 0

    def initialize(self, shard_id: str, stream_name: str, sequence_number: str,
                   sub_sequence_number: int, pending: Optional[Tuple[str, int]],
                   pending_state: Optional[str]) -> Optional[str]:
        self._shard_id = shard_id
        return self._call("initialize", self._processor.initialize, InitializationInput(
            shard_id, stream_name, sequence_number, sub_sequence_number, pending, pending_state))

    def process_records(self, records: Sequence[Any], checkpointer: Any,
                        millis_behind_latest: int) -> Optional[str]:
        with_lag = getattr(self._processor, "_process_records_with_lag", None)
        if with_lag is not None:  # kcl.kclpy's processors also pass on millisBehindLatest
            return self._call("process_records", with_lag, records, checkpointer,
                              millis_behind_latest)
        return self._call("process_records", self._processor.process_records, records,
                          checkpointer)

    def lease_lost(self) -> Optional[str]:
        return self._call("lease_lost", self._processor.lease_lost)

    def shard_ended(self, checkpointer: Any) -> Optional[str]:
        return self._call("shard_ended", self._processor.shard_ended, checkpointer)

    def shutdown_requested(self, checkpointer: Any) -> Optional[str]:
        return self._call("shutdown_requested", self._processor.shutdown_requested, checkpointer)

    def _call(self, name: str, method: Callable[..., Any], *args: Any) -> Optional[str]:
        try:
            method(*args)
        except Exception as e:  # noqa: BLE001 - every failure goes to the core's policy
            return self._failed(name, e)
        if self._failure is not None:
            _log.info("%s of %s succeeded after %d failure(s)", name, self._shard_id,
                      self._failures)
            self._failure = None
            self._failures = 0
        return None

    def _failed(self, name: str, e: Exception) -> str:
        text = "".join(traceback.format_exception(type(e), e, e.__traceback__))
        key = (name, text)
        if key != self._failure:
            self._failure = key
            self._failures = 0
            _log.error("%s of %s raised (logged once for this series of failures):\n%s",
                       name, self._shard_id, text.rstrip())
        self._failures += 1
        return "%s raised %s: %s (failure %d in a row)" % (name, type(e).__name__, e,
                                                          self._failures)


def adapter_factory(processor_factory: Callable[[], RecordProcessor]
                    ) -> Callable[[str], ProcessorAdapter]:
    """The per-shard adapter maker the extension module calls (with the shard id)."""
    def make(shard_id: str) -> ProcessorAdapter:
        processor = processor_factory()
        if not callable(getattr(processor, "process_records", None)):
            raise TypeError("processor_factory returned %r, which has no process_records "
                            "method (subclass kcl.RecordProcessor)" % (processor,))
        return ProcessorAdapter(processor, shard_id)
    return make
