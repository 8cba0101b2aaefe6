"""amazon_kclpy applications in this process: ``python3 -m kcl.kclpy app.properties``.

An application written for amazon_kclpy (AWS's Python KCL, which runs the Java
MultiLangDaemon and one Python child process per shard) runs here unchanged, with no JVM
and no child processes: the runner reads the MultiLangDaemon properties file as
``kcl multilang`` does, makes the ``amazon_kclpy`` modules the application imports
(``amazon_kclpy.kcl``, ``.messages``, ``.v2.processor``, ``.v3.processor``,
``.checkpoint_error``) resolve to this module's implementation, and runs the program named
by ``executableName`` as ``__main__`` in this process. Its
``kcl.KCLProcess(RecordProcessor()).run()`` then runs a kcl.Worker whose record processor
for each shard is an instance of the application's class, called as amazon_kclpy would
call it:

- version 3 processors (``amazon_kclpy.v3.processor.RecordProcessorBase``): ``initialize``,
  ``process_records``, ``lease_lost``, ``shard_ended``, ``shutdown_requested``, each with
  its input object;
- version 2 (``amazon_kclpy.v2.processor``): ``shutdown(shutdown_input)`` with reason
  ``ZOMBIE`` or ``TERMINATE`` in place of ``lease_lost`` and ``shard_ended``;
- the original interface (``amazon_kclpy.kcl.RecordProcessorBase``):
  ``initialize(shard_id)``, ``process_records(records, checkpointer)``,
  ``shutdown(checkpointer, reason)``, ``shutdown_requested(checkpointer)``.

Each shard's processor is a deep copy of the instance given to KCLProcess (its state as the
program made it, as in a fresh child). When deepcopy refuses it (a lock, a client, a
connection), each copy keeps the instance's attributes: deep-copied where they can be, a new
lock for a lock, shared where neither can be done (logged once as a warning); only an
instance that cannot be copied at all is replaced by a new one of its class made with no
arguments, with a warning. Checkpoints raise ``CheckpointError`` with the values the
MultiLangDaemon answers (``ShutdownException`` once the lease is lost,
``ThrottlingException``, ``InvalidStateException`` where no checkpoint is possible,
``IllegalArgumentException``, ``KinesisClientLibDependencyException``). As under
amazon_kclpy, an exception a processor raises is written to the log with its traceback and
the batch counts as processed; ``sys.exit()`` in a processor is a processor failure (by
default the same batch is delivered again; see kcl.Worker's ``on_processor_error``).

``python3 -m kcl.kclpy --child app.py`` runs the same program as a child of ``kcl multilang``
instead (one process per shard): the same modules, with ``KCLProcess.run()`` speaking the
MultiLangDaemon protocol on stdin/stdout.
"""
from __future__ import annotations

import argparse
import base64
import copy
import datetime
import inspect
import json
import logging
import os
import runpy
import sys
import threading
import traceback
import types
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from . import _kcl
from ._processor import InitializationInput, RecordProcessor
from ._worker import Worker
from .errors import ConfigError, KclError

_log = logging.getLogger("kcl.kclpy")


# ----- amazon_kclpy's classes, as kcl-cpp implements them ------------------------------------

class CheckpointError(Exception):
    """A checkpoint failed; ``value`` names why, as the MultiLangDaemon names it
    (``ShutdownException``, ``ThrottlingException``, ``InvalidStateException``, ...)."""

    def __init__(self, value: str) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return repr(self.value)


def _error_name(e: KclError) -> str:
    """The MultiLangDaemon's name for a failed checkpoint (src/multilang's error_name)."""
    if e.code == "LEASE_LOST":
        return "ShutdownException"
    if e.code == "INVALID_ARGUMENT":
        return "IllegalArgumentException"
    if e.code == "FAILED_PRECONDITION":  # outside a callback that may checkpoint
        return "InvalidStateException"
    if e.code == "UNAVAILABLE" and "Throughput" in str((e.aws or {}).get("error_type", "")):
        return "ThrottlingException"
    return "KinesisClientLibDependencyException"


def _sub_sequence_number(value: Any) -> int:
    """A checkpoint's sub-sequence number as the MultiLangDaemon reads it (Jackson, into a
    Long; kcl-cpp's daemon in src/multilang's checkpoint_as_asked): None is 0, an int of 0 or
    more or a string of digits is that number; anything else (negative, a float, a bool,
    other text) is refused with ``IllegalArgumentException``."""
    if value is None:
        return 0
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**64:
        return value
    if isinstance(value, str) and 0 < len(value) < 20 and value.strip("0123456789") == "":
        return int(value)
    raise CheckpointError("IllegalArgumentException")


class Checkpointer:
    """amazon_kclpy's checkpointer over a shard's kcl.Checkpointer."""

    __slots__ = ("_core", "_shard_end")

    def __init__(self, core: Optional[_kcl.Checkpointer]) -> None:
        self._core = core
        self._shard_end = False

    def checkpoint(self, sequence_number: Optional[str] = None,
                   sub_sequence_number: Optional[int] = None) -> None:
        """Checkpoints at the record (sequence_number, sub_sequence_number), or with no
        sequence number at the last record delivered (SHARD_END in shard_ended)."""
        if self._core is None:
            raise CheckpointError("InvalidStateException")
        try:
            if sequence_number is None or (self._shard_end and sequence_number == "SHARD_END"):
                self._core.checkpoint()
            elif not isinstance(sequence_number, str):
                raise CheckpointError("IllegalArgumentException")
            else:
                self._core.checkpoint(sequence_number, _sub_sequence_number(sub_sequence_number))
        except KclError as e:
            _log.warning("checkpoint of %s failed: %s", self._core.shard_id, e)
            raise CheckpointError(_error_name(e)) from e


class LeaseLostCheckpointer:
    """The checkpointer of a ``ZOMBIE`` shutdown: the lease is gone, nothing can be written."""

    def checkpoint(self, sequence_number: Optional[str] = None,
                   sub_sequence_number: Optional[int] = None) -> None:
        raise CheckpointError("Checkpointing is not allowed when the lease is lost")


class Record:
    """A record as amazon_kclpy hands it on: ``binary_data`` (bytes), ``data`` (base64 text),
    ``partition_key``, ``sequence_number``, ``sub_sequence_number``,
    ``approximate_arrival_timestamp`` (a naive local datetime), ``timestamp_millis``; and as a
    mapping of the protocol's field names (``record.get("data")``, ``record["partitionKey"]``)."""

    __slots__ = ()

    @property
    def binary_data(self) -> bytes:
        raise NotImplementedError

    @property
    def partition_key(self) -> str:
        raise NotImplementedError

    @property
    def sequence_number(self) -> str:
        raise NotImplementedError

    @property
    def sub_sequence_number(self) -> int:
        raise NotImplementedError

    @property
    def timestamp_millis(self) -> int:
        raise NotImplementedError

    @property
    def data(self) -> str:
        return base64.b64encode(self.binary_data).decode("ascii")

    @property
    def approximate_arrival_timestamp(self) -> datetime.datetime:
        return datetime.datetime.fromtimestamp(self.timestamp_millis / 1000.0)

    _FIELDS: Dict[str, Callable[["Record"], Any]] = {
        "action": lambda r: "record",
        "data": lambda r: r.data,
        "partitionKey": lambda r: r.partition_key,
        "sequenceNumber": lambda r: r.sequence_number,
        "subSequenceNumber": lambda r: r.sub_sequence_number,
        "approximateArrivalTimestamp": lambda r: r.timestamp_millis,
    }

    def get(self, field: str) -> Any:
        try:
            return Record._FIELDS[field](self)
        except KeyError:
            raise KeyError(field) from None

    def __getitem__(self, field: str) -> Any:
        return self.get(field)

    def __repr__(self) -> str:
        return "Record(partition_key=%r, sequence_number=%r, sub_sequence_number=%r)" % (
            self.partition_key, self.sequence_number, self.sub_sequence_number)


class _NativeRecord(Record):
    """A record read in this process. kcl's core makes the batch's records in one call
    (``RecordBatch._fill``) with every field already set on its slot, so the processor reads
    plain attributes: no Python call per record or field."""

    __slots__ = ("binary_data", "partition_key", "sequence_number", "sub_sequence_number",
                 "timestamp_millis")
    binary_data: bytes
    partition_key: str
    sequence_number: str
    sub_sequence_number: int
    timestamp_millis: int


class _ProtocolRecord(Record):
    """A record of the MultiLangDaemon protocol (a JSON object, data in base64): the same
    interface as Record, for KCLProcess under `kcl multilang`."""

    __slots__ = ("_d",)

    def __init__(self, d: Dict[str, Any]) -> None:  # noqa: D107 - no kcl.Record here
        self._d = d

    @property
    def binary_data(self) -> bytes:
        return base64.b64decode(self._d["data"])

    @property
    def data(self) -> str:
        return str(self._d["data"])

    @property
    def partition_key(self) -> str:
        return str(self._d["partitionKey"])

    @property
    def sequence_number(self) -> str:
        return str(self._d["sequenceNumber"])

    @property
    def sub_sequence_number(self) -> int:
        return int(self._d.get("subSequenceNumber") or 0)

    @property
    def timestamp_millis(self) -> int:
        return int(self._d.get("approximateArrivalTimestamp") or 0)


class InitializeInput:
    """``initialize``'s input: ``shard_id``, ``sequence_number`` and ``sub_sequence_number``
    (where delivery starts: a checkpoint, or TRIM_HORIZON / LATEST / AT_TIMESTAMP)."""

    def __init__(self, shard_id: str, sequence_number: Optional[str],
                 sub_sequence_number: int) -> None:
        self.shard_id = shard_id
        self.sequence_number = sequence_number
        self.sub_sequence_number = sub_sequence_number
        self.action = "initialize"


class ProcessRecordsInput:
    """``process_records``' input: ``records`` (a list of Record), ``checkpointer``,
    ``millis_behind_latest``."""

    def __init__(self, records: List[Record], checkpointer: Checkpointer,
                 millis_behind_latest: int) -> None:
        self.records = records
        self.checkpointer = checkpointer
        self.millis_behind_latest = millis_behind_latest
        self.action = "processRecords"


class LeaseLostInput:
    """``lease_lost``'s input (empty: no checkpoint is possible)."""

    def __init__(self) -> None:
        self.action = "leaseLost"


class ShardEndedInput:
    """``shard_ended``'s input: checkpoint with ``checkpointer.checkpoint()`` (SHARD_END), or
    the shard's children never start."""

    def __init__(self, checkpointer: Checkpointer) -> None:
        self.checkpointer = checkpointer
        self.action = "shardEnded"


class ShutdownRequestedInput:
    """``shutdown_requested``'s input: the worker is stopping; checkpoint what was processed."""

    def __init__(self, checkpointer: Checkpointer) -> None:
        self.checkpointer = checkpointer
        self.action = "shutdownRequested"


class ShutdownInput:
    """Version 2's ``shutdown`` input: ``reason`` ``ZOMBIE`` (the lease was lost: do not
    checkpoint) or ``TERMINATE`` (the shard ended: checkpoint), and ``checkpointer``."""

    def __init__(self, reason: str, checkpointer: Any) -> None:
        self.reason = reason
        self.checkpointer = checkpointer
        self.action = "shutdown"

    @staticmethod
    def zombie() -> "ShutdownInput":
        return ShutdownInput("ZOMBIE", LeaseLostCheckpointer())

    @staticmethod
    def terminate(checkpointer: Any) -> "ShutdownInput":
        return ShutdownInput("TERMINATE", checkpointer)


class RecordProcessorBase:
    """The original interface (``amazon_kclpy.kcl.RecordProcessorBase``, version 1)."""

    version = 1

    def initialize(self, shard_id: str) -> None:
        raise NotImplementedError

    def process_records(self, records: List[Record], checkpointer: Checkpointer) -> None:
        raise NotImplementedError

    def shutdown(self, checkpointer: Any, reason: str) -> None:
        raise NotImplementedError

    def shutdown_requested(self, checkpointer: Checkpointer) -> None:
        pass


class RecordProcessorBaseV2:
    """``amazon_kclpy.v2.processor.RecordProcessorBase`` (version 2)."""

    version = 2

    def initialize(self, initialize_input: InitializeInput) -> None:
        raise NotImplementedError

    def process_records(self, process_records_input: ProcessRecordsInput) -> None:
        raise NotImplementedError

    def shutdown(self, shutdown_input: ShutdownInput) -> None:
        raise NotImplementedError

    def shutdown_requested(self, shutdown_requested_input: ShutdownRequestedInput) -> None:
        pass


class RecordProcessorBaseV3(RecordProcessorBaseV2):
    """``amazon_kclpy.v3.processor.RecordProcessorBase`` (version 3): ``lease_lost`` and
    ``shard_ended`` in place of version 2's ``shutdown``."""

    version = 3

    def lease_lost(self, lease_lost_input: LeaseLostInput) -> None:
        raise NotImplementedError

    def shard_ended(self, shard_ended_input: ShardEndedInput) -> None:
        raise NotImplementedError

    def shutdown_requested(self, shutdown_requested_input: ShutdownRequestedInput) -> None:
        raise NotImplementedError


class KCLProcess:
    """``KCLProcess(processor).run()``: under kcl.kclpy, runs the in-process worker with one
    copy of ``processor`` per shard and returns once it stopped (SIGTERM or Ctrl-C stop it
    gracefully). The file arguments of amazon_kclpy's KCLProcess are accepted and unused."""

    def __init__(self, record_processor: Any, input_file: Any = None, output_file: Any = None,
                 error_file: Any = None) -> None:
        version = getattr(record_processor, "version", 1)
        if version not in (1, 2, 3):
            raise TypeError("record processor %r has version %r; amazon_kclpy processors have "
                            "version 1, 2 or 3" % (record_processor, version))
        if not callable(getattr(record_processor, "process_records", None)):
            raise TypeError("record processor %r has no process_records method"
                            % (record_processor,))
        self.processor = record_processor

    def run(self) -> None:
        session = _session
        if session is not None:
            session.run(self.processor)
        elif _child:
            _serve_protocol(self.processor, sys.stdin, sys.stdout)
        else:
            raise RuntimeError("amazon_kclpy's KCLProcess.run() from kcl-cpp runs under "
                               "`python3 -m kcl.kclpy PROPERTIES` (or `--child PROGRAM` as "
                               "the child of `kcl multilang`)")


# ----- the adapter: one per shard, a kcl.RecordProcessor over an amazon_kclpy processor --------

class _Calls:
    """Calls an amazon_kclpy processor as amazon_kclpy's KCLProcess would, by its interface
    version; what it raises is logged and swallowed (sys.exit() is a failure)."""

    def __init__(self, processor: Any) -> None:
        self._p = processor
        self._version = getattr(processor, "version", 1)
        self._shard = "?"

    def _dispatch(self, what: str, call: Callable[..., Any], *args: Any) -> None:
        try:
            call(*args)
        except SystemExit as e:
            raise RuntimeError("%s of %s called sys.exit(%r): the processor failed"
                               % (what, self._shard, e.code)) from e
        except Exception as e:  # noqa: BLE001 - amazon_kclpy logs it and goes on
            _log.error("Caught exception from action dispatch: %s (%s of %s)\n%s", e, what,
                       self._shard, "".join(traceback.format_exception(type(e), e,
                                                                       e.__traceback__)).rstrip())

    def call_initialize(self, shard_id: str, sequence_number: Optional[str],
                        sub_sequence_number: int) -> None:
        self._shard = shard_id
        if self._version == 1:
            self._dispatch("initialize", self._p.initialize, shard_id)
        else:
            self._dispatch("initialize", self._p.initialize, InitializeInput(
                shard_id, sequence_number, sub_sequence_number))

    def call_process_records(self, batch: List[Record], cp: Checkpointer,
                             millis_behind_latest: int) -> None:
        if self._version == 1:
            self._dispatch("process_records", self._p.process_records, batch, cp)
        else:
            self._dispatch("process_records", self._p.process_records,
                           ProcessRecordsInput(batch, cp, millis_behind_latest))

    def call_lease_lost(self) -> None:
        if self._version == 3:
            self._dispatch("lease_lost", self._p.lease_lost, LeaseLostInput())
        elif self._version == 2:
            self._dispatch("shutdown", self._p.shutdown, ShutdownInput.zombie())
        else:
            self._dispatch("shutdown", self._p.shutdown, LeaseLostCheckpointer(), "ZOMBIE")

    def call_shard_ended(self, cp: Checkpointer) -> None:
        if self._version == 3:
            self._dispatch("shard_ended", self._p.shard_ended, ShardEndedInput(cp))
        elif self._version == 2:
            self._dispatch("shutdown", self._p.shutdown, ShutdownInput.terminate(cp))
        else:
            self._dispatch("shutdown", self._p.shutdown, cp, "TERMINATE")

    def call_shutdown_requested(self, cp: Checkpointer) -> None:
        if self._version == 1:
            method = getattr(self._p, "shutdown_requested", None)
            if method is not None:
                self._dispatch("shutdown_requested", method, cp)
        else:
            self._dispatch("shutdown_requested", self._p.shutdown_requested,
                           ShutdownRequestedInput(cp))


class _Adapter(RecordProcessor):
    """A shard's kcl.RecordProcessor over an amazon_kclpy processor (kcl._processor's
    ProcessorAdapter calls this one)."""

    def __init__(self, processor: Any) -> None:
        self._calls = _Calls(processor)
        self._cp: Optional[Checkpointer] = None

    def _checkpointer(self, core: _kcl.Checkpointer) -> Checkpointer:
        if self._cp is None or self._cp._core is not core:
            self._cp = Checkpointer(core)
        return self._cp

    def initialize(self, input: InitializationInput) -> None:  # noqa: A002
        self._calls.call_initialize(input.shard_id, input.sequence_number,
                                    input.sub_sequence_number)

    def process_records(self, records: _kcl.RecordBatch, checkpointer: _kcl.Checkpointer) -> None:
        self._process_records_with_lag(records, checkpointer, 0)

    def _process_records_with_lag(self, records: _kcl.RecordBatch,
                                  checkpointer: _kcl.Checkpointer,
                                  millis_behind_latest: int) -> None:
        self._calls.call_process_records(records._fill(_NativeRecord),
                                         self._checkpointer(checkpointer), millis_behind_latest)

    def lease_lost(self) -> None:
        self._calls.call_lease_lost()

    def shard_ended(self, checkpointer: _kcl.Checkpointer) -> None:
        cp = self._checkpointer(checkpointer)
        cp._shard_end = True
        try:
            self._calls.call_shard_ended(cp)
        finally:
            cp._shard_end = False

    def shutdown_requested(self, checkpointer: _kcl.Checkpointer) -> None:
        # As under the MultiLangDaemon: the worker lets the lease go after shutdown_requested,
        # and the processor hears of it (lease_lost, or shutdown with ZOMBIE) last.
        self._calls.call_shutdown_requested(self._checkpointer(checkpointer))
        self._calls.call_lease_lost()


# Attributes deepcopy refuses that a copy gets a new one of: a lock guards its own copy's state.
_NEW_IN_EACH_COPY: Dict[type, Callable[[], Any]] = {
    type(threading.Lock()): threading.Lock,
    type(threading.RLock()): threading.RLock,
}


def _copy_by_attributes(template: Any) -> Tuple[Any, List[str]]:
    """A new instance of `template`'s class (not constructed) with its ``__dict__``
    attributes deep-copied where they can be, a new lock for a lock, and the value itself
    (shared by the copies) where neither can be done; and what it could not deep-copy."""
    cls: Any = type(template)
    p = cls.__new__(cls)
    memo: Dict[int, Any] = {}
    state: Dict[str, Any] = {}
    not_copied: List[str] = []
    for name, value in vars(template).items():
        trial = dict(memo)  # a failed copy leaves nothing half made in memo
        try:
            state[name] = copy.deepcopy(value, trial)
            memo = trial
            continue
        except Exception as e:  # noqa: BLE001 - a lock, a socket, a client
            why = "%s: %s" % (type(e).__name__, e)
        make_new = _NEW_IN_EACH_COPY.get(type(value))
        if make_new is not None:
            state[name] = make_new()
            not_copied.append("%r (%s; a new one in each copy)" % (name, why))
        else:
            state[name] = value
            not_copied.append("%r (%s; shared by all copies)" % (name, why))
    p.__dict__.update(state)
    return p, not_copied


def _has_slots(cls: type) -> bool:
    """Whether instances of `cls` keep attributes outside ``__dict__`` (in ``__slots__``)."""
    for k in cls.__mro__:
        slots = k.__dict__.get("__slots__", ())
        if any(n not in ("__dict__", "__weakref__")
               for n in ((slots,) if isinstance(slots, str) else slots)):
            return True
    return False


def _processor_copies(template: Any) -> Callable[[], _Adapter]:
    """One processor per shard: a deep copy of `template`; when deepcopy refuses it, a copy
    made attribute by attribute (_copy_by_attributes), or a shallow copy; as a last resort
    its class called with no arguments. A fallback is logged once, not once per shard."""
    cls = type(template)
    try:
        inspect.signature(cls).bind()
        constructible = True
    except (TypeError, ValueError):
        constructible = False
    warned: List[bool] = []
    warned_lock = threading.Lock()

    def warn_once(message: str, *args: Any) -> None:
        with warned_lock:
            if warned:
                return
            warned.append(True)
        _log.warning(message, *args)

    def make() -> _Adapter:
        try:
            return _Adapter(copy.deepcopy(template))
        except Exception as e:  # noqa: BLE001 - a lock, a socket, a client
            error = e
        what = "record processor %r cannot be deep-copied (%s: %s)" % (
            template, type(error).__name__, error)
        if hasattr(template, "__dict__") and not _has_slots(cls):
            try:
                p, not_copied = _copy_by_attributes(template)
                warn_once("%s; each shard's processor is a copy of its attributes, of which "
                          "%s could not be deep-copied", what,
                          ", ".join(not_copied) or "none")
                return _Adapter(p)
            except Exception:  # noqa: BLE001 - on to a shallow copy
                pass
        try:
            p = copy.copy(template)
            warn_once("%s; each shard's processor is a shallow copy (its attributes shared "
                      "by all shards)", what)
            return _Adapter(p)
        except Exception:  # noqa: BLE001 - on to cls()
            pass
        if not constructible:
            raise TypeError("cannot make a record processor for a shard: %r cannot be "
                            "copied (%s) and %s() needs arguments" % (template, error,
                                                                      cls.__name__)) from error
        warn_once("%s, nor copied in part; each shard's processor is a new %s(), made with no "
                  "arguments", what, cls.__name__)
        return _Adapter(cls())
    return make


# ----- the shim: `import amazon_kclpy` in the application ---------------------------------------

def _module(name: str, doc: str, **attrs: Any) -> types.ModuleType:
    m = types.ModuleType(name, doc)
    m.__dict__.update(attrs)
    return m


def install_amazon_kclpy() -> None:
    """Makes ``import amazon_kclpy`` (and its modules) resolve to this implementation in this
    process. Only the runner calls it: an amazon_kclpy installed on the machine stays as it
    is for every other program."""
    doc = "kcl-cpp's in-process implementation of amazon_kclpy's interfaces (kcl.kclpy)"
    checkpoint_error = _module("amazon_kclpy.checkpoint_error", doc,
                               CheckpointError=CheckpointError)
    messages = _module("amazon_kclpy.messages", doc, CheckpointError=CheckpointError,
                       InitializeInput=InitializeInput, ProcessRecordsInput=ProcessRecordsInput,
                       LeaseLostInput=LeaseLostInput, ShardEndedInput=ShardEndedInput,
                       ShutdownRequestedInput=ShutdownRequestedInput,
                       ShutdownInput=ShutdownInput, LeaseLostCheckpointer=LeaseLostCheckpointer,
                       Record=Record)
    v2_processor = _module("amazon_kclpy.v2.processor", doc,
                           RecordProcessorBase=RecordProcessorBaseV2)
    v3_processor = _module("amazon_kclpy.v3.processor", doc,
                           RecordProcessorBase=RecordProcessorBaseV3)
    v2 = _module("amazon_kclpy.v2", doc, processor=v2_processor, __path__=[])
    v3 = _module("amazon_kclpy.v3", doc, processor=v3_processor, __path__=[])
    kcl_module = _module("amazon_kclpy.kcl", doc, KCLProcess=KCLProcess,
                         RecordProcessorBase=RecordProcessorBase, Checkpointer=Checkpointer,
                         CheckpointError=CheckpointError, messages=messages)
    package = _module("amazon_kclpy", doc, kcl=kcl_module, messages=messages, v2=v2, v3=v3,
                      checkpoint_error=checkpoint_error, __path__=[])
    for m in (package, kcl_module, messages, checkpoint_error, v2, v2_processor, v3,
              v3_processor):
        sys.modules[m.__name__] = m


# ----- as the child of `kcl multilang`: the MultiLangDaemon protocol on stdin/stdout -----------

_child = False


class _ProtocolCheckpointer(Checkpointer):
    """Checkpoints asked of the daemon: a checkpoint message, then its answer."""

    __slots__ = ("_in", "_out")

    def __init__(self, inp: Any, out: Any) -> None:
        super().__init__(None)
        self._in, self._out = inp, out

    def checkpoint(self, sequence_number: Optional[str] = None,
                   sub_sequence_number: Optional[int] = None) -> None:
        _send(self._out, {"action": "checkpoint", "sequenceNumber": sequence_number,
                          "subSequenceNumber": sub_sequence_number})
        line = self._in.readline()
        reply = json.loads(line) if line.strip() else {}
        if reply.get("action") != "checkpoint":
            raise CheckpointError("InvalidStateException")
        if reply.get("error"):
            raise CheckpointError(str(reply["error"]))


def _send(out: Any, message: Dict[str, Any]) -> None:
    out.write("\n" + json.dumps(message) + "\n")
    out.flush()


def _handle_message(calls: _Calls, m: Dict[str, Any], cp: _ProtocolCheckpointer) -> None:
    """One message of the daemon, as amazon_kclpy's KCLProcess dispatches it."""
    action = m["action"]
    if action == "initialize":
        calls.call_initialize(str(m.get("shardId")), m.get("sequenceNumber"),
                              int(m.get("subSequenceNumber") or 0))
    elif action == "processRecords":
        batch: List[Record] = [_ProtocolRecord(r) for r in m["records"]]
        calls.call_process_records(batch, cp, int(m.get("millisBehindLatest") or 0))
    elif action == "leaseLost" or (action == "shutdown" and m.get("reason") == "ZOMBIE"):
        calls.call_lease_lost()
    elif action in ("shardEnded", "shutdown"):
        calls.call_shard_ended(cp)
    elif action == "shutdownRequested":
        calls.call_shutdown_requested(cp)


def _serve_protocol(processor: Any, inp: Any, out: Any) -> None:
    """Answers the daemon's messages until stdin closes (one shard, one processor)."""
    calls = _Calls(processor)
    cp = _ProtocolCheckpointer(inp, out)
    for line in inp:
        if not line.strip():
            continue
        m = json.loads(line)
        _handle_message(calls, m, cp)
        _send(out, {"action": "status", "responseFor": m["action"]})


# ----- the runner ---------------------------------------------------------------------------------

class _Session:
    """One run: the properties file and the options; KCLProcess.run() starts the worker."""

    def __init__(self, properties: str, options: Dict[str, Any]) -> None:
        self.properties = properties
        self.options = options
        self.ran = False
        self.worker: Optional[Worker] = None
        self.started = threading.Event()

    def run(self, template: Any) -> None:
        if self.ran:
            raise RuntimeError("KCLProcess.run() was called twice; one run per program")
        self.ran = True
        version = getattr(template, "version", 1)
        self.worker = Worker.from_properties(self.properties, _processor_copies(template),
                                             **self.options)
        _log.info("running %s (amazon_kclpy interface version %d) in process, one instance "
                  "per shard", type(template).__name__, version)
        self.started.set()
        self.worker.run()


_session: Optional[_Session] = None


def _program(command: Sequence[str], properties: str) -> Tuple[str, str, List[str]]:
    """("path" or "module", the script's path or the module's name, its argv) from the
    executableName command line."""
    args = list(command)
    if args and os.path.basename(args[0]) == "env":
        args = args[1:]
    if args and os.path.basename(args[0]).startswith("python"):
        args = args[1:]
        while args and args[0].startswith("-") and args[0] != "-m":
            args = args[1:]
        if len(args) >= 2 and args[0] == "-m":
            return "module", args[1], args[1:]
    if not args:
        raise ConfigError(["executableName %r names no Python program (expected "
                           "'app.py', 'python3 app.py' or 'python3 -m package.app')"
                           % " ".join(command)])
    script = args[0]
    candidates = [script] if os.path.isabs(script) else [
        script, os.path.join(os.path.dirname(os.path.abspath(properties)), script)]
    for c in candidates:
        if os.path.isfile(c):
            return "path", os.path.abspath(c), [c] + args[1:]
    raise ConfigError(["executableName: %s is not a file (looked in %s)"
                       % (script, " and ".join(os.path.dirname(os.path.abspath(c)) or "."
                                               for c in candidates))])


def run(properties: str, **options: Any) -> None:
    """Runs the amazon_kclpy application of `properties` in this process (what
    ``python3 -m kcl.kclpy`` does after parsing its command line); ``options`` are kcl.Worker
    keywords applied over the file's settings. Returns once the worker stopped."""
    global _session
    try:
        with open(properties, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ConfigError(["cannot read the properties file %s: %s" % (properties, e)]) from e
    info = _kcl.multilang_properties(text, properties)
    if info["dead_letter_stream"]:
        raise ConfigError(["deadLetterStream is not supported in process; use deadLetterFile"])
    if info["ignored_keys"]:
        _log.warning("properties kcl-cpp does not use (ignored): %s",
                     ", ".join(info["ignored_keys"]))
    for warning in info["warnings"]:
        _log.warning("%s", warning)
    kind, target, argv = _program(info["command"], properties)
    install_amazon_kclpy()
    _session = _Session(properties, options)
    saved_argv, saved_path0 = sys.argv[:], sys.path[0] if sys.path else None
    sys.argv = argv
    try:
        if kind == "path":
            sys.path.insert(0, os.path.dirname(target))
            runpy.run_path(target, run_name="__main__")
        else:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        if not _session.ran:
            raise RuntimeError("%s returned without calling KCLProcess(processor).run() (is "
                               "its `if __name__ == \"__main__\":` block there?)" % target)
    finally:
        sys.argv = saved_argv
        if kind == "path" and sys.path and sys.path[0] == os.path.dirname(target) and \
                sys.path[0] != saved_path0:
            del sys.path[0]
        _session = None


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m kcl.kclpy",
        description="Runs an amazon_kclpy application in this process: reads the "
                    "MultiLangDaemon properties file (streamName, applicationName, "
                    "executableName, initialPositionInStream, regionName, failoverTimeMillis, "
                    "...) and runs the record processor of the program named by executableName "
                    "through kcl-cpp's worker, one instance per shard, with no JVM and no child "
                    "processes. SIGTERM or Ctrl-C stop it gracefully.")
    parser.add_argument("properties", nargs="?",
                        help="the MultiLangDaemon properties file")
    parser.add_argument("--child", nargs=argparse.REMAINDER, metavar="PROGRAM",
                        help="instead: run PROGRAM [ARGS] as the child of `kcl multilang` "
                             "(executableName = python3 -m kcl.kclpy --child app.py), its "
                             "amazon_kclpy imports served by kcl-cpp speaking the "
                             "MultiLangDaemon protocol on stdin/stdout")
    parser.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                        help="a kcl.Worker option over the file's settings (repeatable; "
                             "VALUE is read as a Python literal when it is one, e.g. "
                             "--option failover_time=3.0)")
    parser.add_argument("--log-level", default="INFO",
                        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                        help="the level of the log on stderr (default INFO)")
    parser.add_argument("--version", action="version", version="kcl-cpp " + _kcl.__version__)
    a = parser.parse_args(argv)
    if a.child is not None:
        if a.properties is not None or not a.child:
            parser.error("--child PROGRAM [ARGS...] takes no properties file")
        return _run_child(a.child)
    if a.properties is None:
        parser.error("the properties file is required")
    logging.basicConfig(level=getattr(logging, a.log_level), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    options: Dict[str, Any] = {}
    for item in a.option:
        name, sep, value = item.partition("=")
        if not sep or not name:
            parser.error("--option %r: expected NAME=VALUE" % item)
        options[name] = _literal(value)
    try:
        run(a.properties, **options)
    except ConfigError as e:
        print("kcl.kclpy: %s: %s" % (a.properties, "; ".join(e.problems)), file=sys.stderr)
        return 2
    except KclError as e:
        print("kcl.kclpy: the worker stopped on an error: %s" % e, file=sys.stderr)
        return 1
    return 0


def _run_child(argv: List[str]) -> int:
    """`--child PROGRAM ARGS`: the program as the child of a MultiLangDaemon."""
    global _child
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    install_amazon_kclpy()
    _child = True
    kind, target, program_argv = _program(argv, os.path.join(os.getcwd(), "-"))
    sys.argv = program_argv
    if kind == "path":
        sys.path.insert(0, os.path.dirname(target))
        runpy.run_path(target, run_name="__main__")
    else:
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    return 0


def _literal(text: str) -> Any:
    import ast
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


if __name__ == "__main__":
    # `python3 -m kcl.kclpy` runs this file as __main__: the classes the application gets
    # are kcl.kclpy's own (one module, one session).
    from kcl.kclpy import main as _main
    sys.exit(_main())
