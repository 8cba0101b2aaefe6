"""kcl.Producer: writes records in PutRecords batches, KPL-aggregated, at a rate each shard
accepts, retrying only the records that failed."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Union

from . import _kcl
from ._kcl import PutResult
from ._lifecycle import track
from ._stats import ProducerStats

if TYPE_CHECKING:  # asyncio is imported when first used: it costs a third of `import kcl`
    import asyncio
    import concurrent.futures

Data = Union[bytes, bytearray, memoryview, str]


class Producer:
    """A kcl-cpp producer in this process.

        producer = kcl.Producer(stream="orders")
        future = producer.put("customer-42", b"...")     # concurrent.futures.Future
        producer.flush()
        result = future.result()                          # kcl.PutResult
        producer.shutdown()

    Every put() resolves exactly once: with a kcl.PutResult (shard, sequence number,
    sub-sequence number inside its aggregate) or with a kcl.KclError (InvalidArgumentError for
    a bad record; the service's error once ``max_attempts`` sends failed; UnavailableError
    when the buffer is full and ``block_when_full=False``; CancelledError after shutdown).
    Options: those of kcl-cpp's ProducerConfig (``linger``, ``aggregate``,
    ``max_buffered_records``, ``max_attempts``, ``report_positions``, ...) and the AWS ones of
    kcl.Worker. ``report_positions=False`` leaves each PutResult's shard and sequence number
    empty, for callers that only need to know a record was written; it costs less.
    """

    def __init__(self, stream: Optional[str] = None, **options: Any) -> None:
        self._core: _kcl._Producer = _kcl._Producer(dict(options, stream=stream))
        track(self)

    def put(self, partition_key: str, data: Data,
            explicit_hash_key: str = "") -> "concurrent.futures.Future[PutResult]":
        """Queues one record (str data is sent as UTF-8); the future resolves once."""
        return self._core.put(partition_key, data, explicit_hash_key)

    def put_async(self, partition_key: str, data: Data,
                  explicit_hash_key: str = "") -> "asyncio.Future[PutResult]":
        """put() as an asyncio future of the running loop (await it)."""
        import asyncio
        return asyncio.wrap_future(self._core.put(partition_key, data, explicit_hash_key))

    def flush(self, timeout: Optional[float] = None) -> None:
        """Sends what is buffered now and waits until every record put so far resolved;
        DeadlineExceededError after `timeout` seconds, naming how many are left."""
        self._core.flush(timeout)

    def shutdown(self) -> None:
        """Sends what is left (for at most ``close_timeout``), then stops; records still
        buffered then fail with CancelledError (and this raises DeadlineExceededError)."""
        self._core.shutdown()

    def stats(self) -> ProducerStats:
        """The producer's figures (kcl.ProducerStats)."""
        return ProducerStats._from_core(self._core.stats())

    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()

    def _stop_at_exit(self) -> None:
        self._core.shutdown()


def producer_options() -> List[str]:
    """The option names kcl.Producer accepts."""
    return sorted(_kcl.producer_option_names())
