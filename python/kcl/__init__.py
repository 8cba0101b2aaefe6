"""kcl: kcl-cpp's Kinesis Client Library in this Python process.

- kcl.Worker with a kcl.RecordProcessor per shard (callbacks, batch by batch);
- kcl.PullConsumer: iterate records and acknowledge each from any thread, in any order;
- kcl.Producer: put records (futures or asyncio), aggregated, rate-aware.

Errors are kcl.KclError subclasses (kcl.errors); log lines go to the logger "kcl".
"""
from __future__ import annotations

from . import errors
from .errors import (AckCancelledError, AlreadyExistsError, ConditionFailedError, ConfigError,
                     DeadlineExceededError, ExpiredIteratorError, FailedPreconditionError,
                     InternalError, InvalidArgumentError, KclError, LeaseLostError,
                     NotFoundError, PermissionDeniedError, UnavailableError)
from . import _logging  # noqa: F401  (imported by the extension module)
import collections.abc as _abc
from typing import TYPE_CHECKING, Any

from ._kcl import Checkpointer, PulledRecord, PutResult, Record, RecordBatch
from ._kcl import __version__
from ._processor import InitializationInput, RecordProcessor
from ._producer import Producer, producer_options
from ._pull import PullConsumer, pull_options
from ._stats import FailingShard, ProducerStats, PullStats, WorkerStats
from ._worker import Worker, worker_options

_abc.Sequence.register(RecordBatch)

if TYPE_CHECKING:
    from .errors import CancelledError
else:
    def __getattr__(name: str) -> Any:
        # kcl.CancelledError: made at its first use (it imports asyncio; kcl/errors.py).
        if name == "CancelledError":
            return errors.CancelledError
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "__version__", "WorkerStats", "FailingShard", "PullStats", "ProducerStats",
    "Worker", "worker_options", "PullConsumer", "pull_options", "PulledRecord", "Producer",
    "producer_options", "PutResult", "RecordProcessor", "InitializationInput", "Record", "RecordBatch",
    "Checkpointer", "errors", "KclError", "ConfigError", "LeaseLostError", "UnavailableError",
    "ConditionFailedError", "NotFoundError", "AlreadyExistsError", "ExpiredIteratorError",
    "InvalidArgumentError", "PermissionDeniedError", "FailedPreconditionError",
    "DeadlineExceededError", "CancelledError", "AckCancelledError", "InternalError",
]
