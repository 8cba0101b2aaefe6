"""Exceptions raised by kcl: one class per kcl-cpp status code, all under KclError.

The code says what to do next (see include/kcl/status.h): UnavailableError is transient
(retry later), LeaseLostError means stop working on the shard, ConfigError and
InvalidArgumentError mean fix the input, and so on.
"""
from __future__ import annotations

import concurrent.futures
import threading
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Type


class KclError(Exception):
    """Base class of every error kcl raises.

    Attributes: ``code`` (the status code's name, e.g. ``"LEASE_LOST"``), ``message`` (one
    line for people) and ``aws`` (details of a failed AWS call as a dict, or None).
    """

    code: str = "INTERNAL"

    def __init__(self, message: str, code: Optional[str] = None,
                 aws: Optional[Dict[str, object]] = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.aws = aws


class UnavailableError(KclError):
    """Transient (throttled, 5xx, timeout, connection failure): retry later."""
    code = "UNAVAILABLE"


class ConditionFailedError(KclError):
    """A conditional write lost a race."""
    code = "CONDITION_FAILED"


class LeaseLostError(KclError):
    """This worker no longer holds the shard's lease: stop working on the shard."""
    code = "LEASE_LOST"


class NotFoundError(KclError):
    """The stream, table, item or shard does not exist."""
    code = "NOT_FOUND"


class AlreadyExistsError(KclError):
    """The resource exists or is being changed."""
    code = "ALREADY_EXISTS"


class ExpiredIteratorError(KclError):
    """A shard iterator expired."""
    code = "EXPIRED_ITERATOR"


class InvalidArgumentError(KclError, ValueError):
    """The request is wrong (a checkpoint out of range, a bad record): fix the input."""
    code = "INVALID_ARGUMENT"


class ConfigError(InvalidArgumentError):
    """The options are wrong; ``problems`` lists every problem, each naming the option."""

    def __init__(self, problems: List[str]) -> None:
        self.problems = list(problems)
        super().__init__("invalid kcl options: " + "; ".join(self.problems))


class PermissionDeniedError(KclError):
    """Credentials missing, wrong or not allowed."""
    code = "PERMISSION_DENIED"


class FailedPreconditionError(KclError):
    """The system is in a state that does not allow the operation."""
    code = "FAILED_PRECONDITION"


class DeadlineExceededError(KclError, TimeoutError):
    """A deadline passed (flush, shutdown, a call after its retries)."""
    code = "DEADLINE_EXCEEDED"


class AckCancelledError(KclError):
    """PulledRecord.ack() or nack() after the record's shard moved on without it (its lease
    handed off, or the consumer stopped, once the drain bound passed): harmless, the next
    owner delivers the record again. Not an asyncio.CancelledError: a task that acks late
    fails, it is not cancelled."""
    code = "CANCELLED"


def _ack_cancelled(message: str, aws: Optional[Dict[str, object]]) -> KclError:
    """The exception of an ack refused as too late (called by the extension module)."""
    return AckCancelledError(message, "CANCELLED", aws)


_CANCELLED_DOC = """Abandoned because of shutdown. Also an asyncio.CancelledError and a
    concurrent.futures.CancelledError, so code written for either catches it (a producer
    future cancelled at shutdown, an awaited put_async())."""

if TYPE_CHECKING:
    import asyncio

    class CancelledError(KclError, concurrent.futures.CancelledError, asyncio.CancelledError):
        code = "CANCELLED"


class InternalError(KclError):
    """A malformed response or a broken invariant."""
    code = "INTERNAL"


_BY_CODE: Dict[str, Type[KclError]] = {cls.code: cls for cls in (
    UnavailableError, ConditionFailedError, LeaseLostError, NotFoundError, AlreadyExistsError,
    ExpiredIteratorError, InvalidArgumentError, PermissionDeniedError, FailedPreconditionError,
    DeadlineExceededError, InternalError)}

# CancelledError derives from asyncio.CancelledError, and importing asyncio costs more than
# the rest of `import kcl` together (about 30 ms of CPU at each start of a Python process that
# imports kcl): the class is made at its first use (PEP 562), once.
_cancelled_lock = threading.Lock()


def _cancelled_error() -> Type[KclError]:
    with _cancelled_lock:
        made = globals().get("CancelledError")
        if made is None:
            import asyncio

            made = type("CancelledError",
                        (KclError, concurrent.futures.CancelledError, asyncio.CancelledError),
                        {"__doc__": _CANCELLED_DOC, "code": "CANCELLED", "__module__": __name__})
            globals()["CancelledError"] = made
            _BY_CODE["CANCELLED"] = made
        return made


def __getattr__(name: str) -> Any:
    if name == "CancelledError":
        return _cancelled_error()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _from_status(code: str, message: str, aws: Optional[Dict[str, object]]) -> KclError:
    """The exception for a failed kcl-cpp Status (called by the extension module)."""
    cls = _cancelled_error() if code == "CANCELLED" else _BY_CODE.get(code, KclError)
    return cls(message, code, aws)


def _config_error(problems: List[str]) -> ConfigError:
    return ConfigError(problems)
