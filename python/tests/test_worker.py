"""kcl.Worker with Python record processors, against kinesalite and dynalite."""
from __future__ import annotations

import collections.abc
import concurrent.futures
import datetime
import logging
import threading
from typing import Any, Dict, List

import pytest

import kcl
from conftest import Running, wait_until


class Collect(kcl.RecordProcessor):
    """Keeps every record it is given and checkpoints after each batch."""

    seen: Dict[str, List[Any]]
    lock = threading.Lock()

    def __init__(self, sink: Dict[str, List[Any]], ended: List[str]) -> None:
        self.sink = sink
        self.ended = ended
        self.shard = ""

    def initialize(self, input: kcl.InitializationInput) -> None:
        self.shard = input.shard_id

    def process_records(self, records, checkpointer) -> None:
        with self.lock:
            self.sink.setdefault(self.shard, []).extend(
                (r.sequence_number, r.partition_key, bytes(r.data), r.shard_id) for r in records)
        checkpointer.checkpoint()

    def shard_ended(self, checkpointer) -> None:
        self.ended.append(self.shard)
        checkpointer.checkpoint()

    def shutdown_requested(self, checkpointer) -> None:
        checkpointer.checkpoint()


def put_numbered(emulators, stream: str, n: int, start: int = 0) -> List[Dict[str, Any]]:
    return emulators.kinesis.put_records(
        stream, [("key-%d" % i, b"record-%06d" % i) for i in range(start, start + n)])


def test_every_record_reaches_a_processor_and_is_checkpointed(emulators, names, options):
    stream, app = names("s"), names("app")
    emulators.kinesis.create_stream(stream, 2)
    put = put_numbered(emulators, stream, 300)
    sink: Dict[str, List[Any]] = {}
    worker = kcl.Worker(stream=stream, app=app, processor_factory=lambda: Collect(sink, []),
                        **options)
    running = Running(worker)
    wait_until(lambda: sum(len(v) for v in sink.values()) >= 300, what="300 records")
    # A batch is counted as delivered once its callback has returned.
    wait_until(lambda: worker.stats().records_delivered >= 300, what="300 counted")
    stats = worker.stats()
    running.stop()

    got = sorted(d for v in sink.values() for (_, _, d, _) in v)
    assert got == [b"record-%06d" % i for i in range(300)]
    for shard, recs in sink.items():
        assert all(s == shard for (_, _, _, s) in recs)
        seqs = [int(q) for (q, _, _, _) in recs]
        assert seqs == sorted(seqs), "records of a shard in shard order"
    assert stats.records_delivered == 300
    # Every shard's checkpoint is its last record.
    last = {}
    for p in put:
        last[p["ShardId"]] = max(last.get(p["ShardId"], 0), int(p["SequenceNumber"]))
    leases = emulators.dynamodb.leases(app)
    assert {k: int(v["checkpoint"]) for k, v in leases.items()} == last


def test_record_fields(emulators, names, options):
    stream, app = names("s"), names("app")
    emulators.kinesis.create_stream(stream, 1)
    before = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=5)
    put = emulators.kinesis.put_records(stream, [("pk-é", b"\x00\x01payload\xff")])
    records: List[kcl.Record] = []

    class Keep(kcl.RecordProcessor):
        def process_records(self, batch, checkpointer):
            records.extend(batch)

    running = Running(kcl.Worker(stream=stream, app=app, processor_factory=Keep, **options))
    wait_until(lambda: records, what="one record")
    running.stop()
    r = records[0]
    assert isinstance(r.data, memoryview) and r.data.readonly
    assert bytes(r.data) == b"\x00\x01payload\xff" == bytes(r)
    assert len(r) == 10
    assert r.partition_key == "pk-é"
    assert r.sequence_number == put[0]["SequenceNumber"]
    assert r.sub_sequence_number == 0 and not r.aggregated
    assert r.shard_id == put[0]["ShardId"]
    ts = r.approximate_arrival_timestamp
    assert before <= ts <= datetime.datetime.now(datetime.timezone.utc)
    with pytest.raises(TypeError):
        r.data[0] = 1  # read-only: the bytes are the batch's


def test_a_batch_is_a_read_only_sequence_of_records(emulators, names, options):
    stream, app = names("s"), names("app")
    emulators.kinesis.create_stream(stream, 1)
    put_numbered(emulators, stream, 20)
    seen: List[Dict[str, Any]] = []

    class Inspect(kcl.RecordProcessor):
        def process_records(self, records, checkpointer) -> None:
            n = len(records)
            by_index = [records[i].sequence_number for i in range(n)]
            try:
                records[n]
                out_of_range = False
            except IndexError:
                out_of_range = True
            seen.append({
                "type": type(records).__name__,
                "sequence": isinstance(records, collections.abc.Sequence),
                "n": n, "truthy": bool(records),
                "iterated": [r.sequence_number for r in records], "by_index": by_index,
                "last": records[-1].sequence_number, "slice": [r.sequence_number for r in records[1:3]],
                "out_of_range": out_of_range, "data": [bytes(r.data) for r in list(records)],
            })
            checkpointer.checkpoint()

    worker = kcl.Worker(stream=stream, app=app, processor_factory=Inspect, **options)
    running = Running(worker)
    wait_until(lambda: sum(b["n"] for b in seen) >= 20, what="20 records")
    running.stop()
    for b in seen:
        assert b["type"] == "RecordBatch" and b["sequence"] and b["truthy"]
        assert b["iterated"] == b["by_index"] and len(b["iterated"]) == b["n"]
        assert b["last"] == b["by_index"][-1]
        assert b["slice"] == b["by_index"][1:3]
        assert b["out_of_range"]
    assert sorted(d for b in seen for d in b["data"]) == [b"record-%06d" % i for i in range(20)]


def test_a_processor_that_raises_gets_the_batch_again_and_its_traceback_logged_once(
        emulators, names, options, caplog):
    stream, app = names("s"), names("app")
    emulators.kinesis.create_stream(stream, 1)
    put_numbered(emulators, stream, 20)
    attempts: List[int] = []
    delivered: List[bytes] = []

    class Flaky(kcl.RecordProcessor):
        def process_records(self, batch, checkpointer):
            attempts.append(len(batch))
            if len(attempts) <= 3:
                raise ValueError("flaky downstream")
            delivered.extend(bytes(r.data) for r in batch)
            checkpointer.checkpoint()

    caplog.set_level(logging.INFO, logger="kcl")
    running = Running(kcl.Worker(stream=stream, app=app, processor_factory=Flaky, **options))
    wait_until(lambda: len(delivered) >= 20, what="the batch after three failures")
    running.stop()
    assert attempts[:4] == [20, 20, 20, 20], "the same batch again after each failure"
    assert delivered == [b"record-%06d" % i for i in range(20)]
    tracebacks = [r for r in caplog.records if r.name == "kcl.processor"
                  and "Traceback" in r.getMessage()]
    assert len(tracebacks) == 1, [r.getMessage() for r in tracebacks]
    assert "ValueError: flaky downstream" in tracebacks[0].getMessage()
    assert "raise ValueError" in tracebacks[0].getMessage()
    core = [r for r in caplog.records if r.name == "kcl.consumer"
            and "process_records raised ValueError: flaky downstream" in r.getMessage()]
    # The core reports a series once with its count (attempts 1, 3, 10, ...), not per retry,
    # and the delivery that ends it.
    assert ["(attempt 1)" in r.getMessage() for r in core] == [True, False], \
        [r.getMessage() for r in core]
    assert "(attempt 3)" in core[1].getMessage()
    assert any(r.name == "kcl.consumer" and "delivered the 20 records at attempt 4" in
               r.getMessage() for r in caplog.records)
    assert any("succeeded after 3 failure(s)" in r.getMessage() for r in caplog.records)


def test_checkpoint_from_another_thread_during_the_callback(emulators, names, options):
    stream, app = names("s"), names("app")
    emulators.kinesis.create_stream(stream, 1)
    put = put_numbered(emulators, stream, 10)
    pool = concurrent.futures.ThreadPoolExecutor(2)
    kept: List[Any] = []
    done = threading.Event()

    class ViaPool(kcl.RecordProcessor):
        def process_records(self, batch, checkpointer):
            # The checkpoint is written by a pool thread while this callback waits for it.
            pool.submit(checkpointer.checkpoint, batch[4]).result()
            assert checkpointer.last_checkpoint == (batch[4].sequence_number, 0)
            kept.append(checkpointer)
            done.set()

    running = Running(kcl.Worker(stream=stream, app=app, processor_factory=ViaPool, **options))
    done.wait(60)
    lease = wait_until(lambda: emulators.dynamodb.leases(app).get(put[0]["ShardId"]))
    assert lease["checkpoint"] == put[4]["SequenceNumber"]
    # Once the callback has returned (done is set just before it does), the checkpointer
    # refuses: it belonged to that call. Until then a checkpoint at the same position is a
    # no-op, so the test asks again until the refusal comes.
    def refuses() -> bool:
        try:
            pool.submit(kept[0].checkpoint, put[4]["SequenceNumber"]).result()
        except kcl.FailedPreconditionError as e:
            assert "valid only while the callback" in str(e)
            return True
        return False

    wait_until(refuses, what="the checkpointer to refuse after its callback returned")
    running.stop()
    pool.shutdown()


class ThreadMarks:
    """Notes, at each call on a thread, the mark threading.local held on entry, then marks it:
    a thread whose Python thread state is kept finds its own mark at its next call."""

    def __init__(self) -> None:
        self.local = threading.local()
        self.calls: List[Any] = []  # (thread ident, the mark held on entry)

    def note(self) -> None:
        self.calls.append((threading.get_ident(), getattr(self.local, "mark", None)))
        self.local.mark = threading.get_ident()

    def repeated(self) -> int:
        """Calls on a thread seen before; each must have found the thread's own mark."""
        seen = set()
        again = 0
        for ident, mark in list(self.calls):
            if ident in seen:
                again += 1
                assert mark == ident, "threading.local lost between two calls on thread %d" % ident
            seen.add(ident)
        return again


def test_a_core_thread_keeps_its_python_thread_state_between_callbacks(emulators, names, options):
    """threading.local values set in one callback are there in the next on the same thread."""
    stream, app = names("s"), names("app")
    emulators.kinesis.create_stream(stream, 1)
    marks = ThreadMarks()

    class Marks(kcl.RecordProcessor):
        def initialize(self, input):
            marks.note()

        def process_records(self, batch, checkpointer):
            marks.note()
            checkpointer.checkpoint()

    # One pool thread: every callback runs on it.
    running = Running(kcl.Worker(stream=stream, app=app, processor_factory=Marks,
                                 thread_pool_size=1, **options))
    # One batch at a time, so that there are several callbacks.
    for i in range(6):
        put_numbered(emulators, stream, 1, start=i)
        wait_until(lambda: len(marks.calls) >= i + 2, what="callback %d" % (i + 2))
    running.stop()
    assert marks.repeated() > 0, "no two callbacks on one thread: %s" % marks.calls


def test_a_core_thread_keeps_its_python_thread_state_between_log_lines(emulators, names, options):
    """A logging handler on a core thread finds its threading.local values at the next line."""
    stream, app = names("s"), names("app")
    emulators.kinesis.create_stream(stream, 1)
    marks = ThreadMarks()

    class Marks(logging.Handler):
        def emit(self, record):
            if threading.current_thread() is not threading.main_thread():
                marks.note()

    logger = logging.getLogger("kcl")
    handler = Marks(level=logging.DEBUG)
    before = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        class Nothing(kcl.RecordProcessor):
            def process_records(self, batch, checkpointer):
                pass

        running = Running(kcl.Worker(stream=stream, app=app, processor_factory=Nothing, **options))

        wait_until(lambda: marks.repeated() > 0, what="two log lines from one core thread")
        running.stop()
    finally:
        logger.removeHandler(handler)
        logger.setLevel(before)
    marks.repeated()


def test_checkpoint_errors_are_typed(emulators, names, options):
    stream, app = names("s"), names("app")
    emulators.kinesis.create_stream(stream, 1)
    put_numbered(emulators, stream, 3)
    errors: List[BaseException] = []

    class Bad(kcl.RecordProcessor):
        def process_records(self, batch, checkpointer):
            checkpointer.checkpoint(batch[1])
            for position in ("12", "not-a-number"):
                try:
                    checkpointer.checkpoint(position)
                except kcl.KclError as e:
                    errors.append(e)

    running = Running(kcl.Worker(stream=stream, app=app, processor_factory=Bad, **options))
    wait_until(lambda: len(errors) >= 2)
    running.stop()
    assert all(isinstance(e, kcl.InvalidArgumentError) for e in errors), errors
    assert errors[0].code == "INVALID_ARGUMENT"


def test_the_http_endpoint_serves_metrics_and_status(emulators, names, options):
    import json
    import urllib.request
    stream, app = names("s"), names("app")
    emulators.kinesis.create_stream(stream, 1)
    put_numbered(emulators, stream, 5)
    sink: Dict[str, List[Any]] = {}
    worker = kcl.Worker(stream=stream, app=app, processor_factory=lambda: Collect(sink, []),
                        http_address="127.0.0.1:0", **options)
    running = Running(worker)
    try:
        wait_until(lambda: sum(len(v) for v in sink.values()) >= 5)
        assert worker.http_url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(worker.http_url + "/metrics", timeout=10) as r:
            metrics = r.read().decode()
        with urllib.request.urlopen(worker.http_url + "/status.json", timeout=10) as r:
            status = json.loads(r.read())
    finally:
        running.stop()
    assert "kcl_" in metrics and "records" in metrics
    assert worker.worker_id in json.dumps(status)
