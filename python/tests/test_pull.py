"""kcl.PullConsumer from Python: out-of-order acks from 8 threads, the low watermark,
a SIGKILL and restart, asyncio iteration, nack to a dead-letter file."""
from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import json
import os
import random
import signal
import subprocess
import sys
import time
from typing import Dict, List, Set

import pytest

import kcl
from conftest import wait_until

HERE = os.path.dirname(os.path.abspath(__file__))


def put_numbered(emulators, stream, n):
    return emulators.kinesis.put_records(
        stream, [("key-%d" % i, b"r%05d" % i) for i in range(n)])


def test_eight_threads_ack_out_of_order_and_checkpoints_follow_the_watermark(
        emulators, names, options):
    stream, app = names("s"), names("app")
    emulators.kinesis.create_stream(stream, 4)
    put = put_numbered(emulators, stream, 800)
    by_shard: Dict[str, List[str]] = {}
    for p in put:
        by_shard.setdefault(p["ShardId"], []).append(p["SequenceNumber"])
    held_shard = put[0]["ShardId"]
    held_seq = by_shard[held_shard][9]  # this one record is not acknowledged for a while
    held: List[kcl.PulledRecord] = []
    done: Set[str] = set()
    order: Dict[str, List[str]] = {}

    def finish(r: kcl.PulledRecord) -> None:
        time.sleep(random.random() * 0.005)
        if r.sequence_number == held_seq:
            held.append(r)
            return
        r.ack()
        done.add(bytes(r.data).decode())

    consumer = kcl.PullConsumer(stream=stream, app=app, checkpoint_interval=0.05, **options)
    consumer.start()
    try:
        check_watermark(emulators, app, consumer, finish, order, by_shard, held, held_shard,
                        done)
    finally:
        consumer.shutdown()
    assert consumer.next(timeout=0.1) is None


def check_watermark(emulators, app, consumer, finish, order, by_shard, held, held_shard, done):
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        for _ in range(800):
            r = consumer.next(timeout=30)
            assert r is not None, "records stopped coming (%d done)" % len(done)
            order.setdefault(r.shard_id, []).append(r.sequence_number)
            pool.submit(finish, r)
    # In shard order per shard, every record once.
    assert order == by_shard
    # The shard with the record not acknowledged stays checkpointed just below it.
    below = by_shard[held_shard][8]
    wait_until(lambda: all(
        v["checkpoint"] == (below if k == held_shard else by_shard[k][-1])
        for k, v in emulators.dynamodb.leases(app).items()), what="watermark checkpoints")
    time.sleep(0.3)  # several checkpoint intervals: it must not pass the held record
    assert emulators.dynamodb.leases(app)[held_shard]["checkpoint"] == below
    stats = consumer.stats()
    assert stats.unacked == 1 and stats.acked == 799
    held[0].ack()
    with pytest.raises(kcl.FailedPreconditionError):
        held[0].ack()
    wait_until(lambda: emulators.dynamodb.leases(app)[held_shard]["checkpoint"]
               == by_shard[held_shard][-1], what="the checkpoint after the last ack")


def test_nack_writes_the_record_to_the_dead_letter_file_and_counts_as_its_ack(
        emulators, names, options, tmp_path):
    stream, app = names("s"), names("app")
    emulators.kinesis.create_stream(stream, 1)
    put = put_numbered(emulators, stream, 10)
    dead = str(tmp_path / "dead.jsonl")
    consumer = kcl.PullConsumer(stream=stream, app=app, checkpoint_interval=0.05,
                                dead_letter_file=dead, **options)
    consumer.start()
    try:
        for _ in range(10):
            r = consumer.next(timeout=30)
            assert r is not None
            if bytes(r.data) == b"r00003":
                r.nack("cannot parse r00003")
                with pytest.raises(kcl.FailedPreconditionError):
                    r.ack()
            else:
                r.ack()
        wait_until(lambda: list(emulators.dynamodb.leases(app).values())[0]["checkpoint"]
                   == put[-1]["SequenceNumber"], what="the checkpoint past the nacked record")
    finally:
        consumer.shutdown()
    with open(dead) as f:
        letters = [json.loads(line) for line in f]
    assert len(letters) == 1
    assert letters[0]["sequence_number"] == put[3]["SequenceNumber"]
    assert letters[0]["error"] == "cannot parse r00003"
    assert base64.b64decode(letters[0]["data"]) == b"r00003"


def finished(path: str) -> List[List[str]]:
    try:
        with open(path) as f:
            return [line.split() for line in f if line.endswith("\n")]
    except FileNotFoundError:
        return []


def test_every_record_completed_across_a_sigkill_and_restart(emulators, names, tmp_path):
    stream, app = names("s"), names("app")
    emulators.kinesis.create_stream(stream, 4)
    put_numbered(emulators, stream, 3000)
    env = emulators.env()
    first, second = str(tmp_path / "first"), str(tmp_path / "second")

    def run(out: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, os.path.join(HERE, "pull_child.py"), stream,
                                 app, out], env=env)

    p = run(first)
    try:
        wait_until(lambda: len(finished(first)) >= 1000, what="a third of the records")
        p.send_signal(signal.SIGKILL)
        p.wait(10)
    finally:
        if p.poll() is None:
            p.kill()
    checkpoints = {k: v["checkpoint"] for k, v in emulators.dynamodb.leases(app).items()}
    assert any(c.isdigit() for c in checkpoints.values()), checkpoints
    p = run(second)
    try:
        want = {"r%05d" % i for i in range(3000)}
        # Read while the second run writes: a line caught half written is skipped here (the
        # checks below read the files after the run ended).
        wait_until(lambda: want <= {x[2] for x in finished(first) + finished(second)
                                    if len(x) == 3},
                   timeout=120, what="every record finished by one run or the other")
    finally:
        p.send_signal(signal.SIGTERM)
        assert p.wait(60) == 0, "SIGTERM stops the pull consumer gracefully"
    again = finished(second)
    for shard, seq, _ in again:
        c = checkpoints.get(shard, "TRIM_HORIZON")
        assert not c.isdigit() or int(seq) > int(c), \
            "record %s of %s at or below the checkpoint %s delivered again" % (seq, shard, c)
    # What the first run finished after its last checkpoint comes again (at-least-once).
    redo = {(s, q) for s, q, _ in finished(first)
            if checkpoints.get(s, "").isdigit() and int(q) > int(checkpoints[s])}
    assert redo <= {(s, q) for s, q, _ in again}


def test_async_iteration(emulators, names, options):
    stream, app = names("s"), names("app")
    emulators.kinesis.create_stream(stream, 2)
    put_numbered(emulators, stream, 100)

    async def consume() -> List[bytes]:
        got: List[bytes] = []
        consumer = kcl.PullConsumer(stream=stream, app=app, **options)
        consumer.start()
        async for r in consumer:
            got.append(bytes(r.data))
            r.ack()
            if len(got) == 100:
                consumer.begin_shutdown()
        consumer.shutdown()
        return got

    got = asyncio.run(asyncio.wait_for(consume(), 60))
    assert sorted(got) == [b"r%05d" % i for i in range(100)]


def test_a_cancelled_async_iteration_keeps_the_record_its_poll_took(emulators, names, options):
    """asyncio.wait_for around each record with a short timeout, records arriving meanwhile:
    a cancelled wait cannot stop its poll's thread, which may still take a record. That record
    was dropped, taken and never acknowledged (the shard's checkpoint stopped for good); now
    it comes with the next iteration."""
    stream, app = names("s"), names("app")
    emulators.kinesis.create_stream(stream, 1)

    def put_slowly() -> None:
        for i in range(20):
            emulators.kinesis.put_records(stream, [("k", b"r%05d" % i)])
            time.sleep(0.1)

    async def consume() -> List[bytes]:
        loop = asyncio.get_running_loop()
        got: List[bytes] = []
        consumer = kcl.PullConsumer(stream=stream, app=app, **options)
        consumer.start()
        try:
            putting = loop.run_in_executor(None, put_slowly)
            deadline = loop.time() + 60
            while len(got) < 20 and loop.time() < deadline:
                try:
                    r = await asyncio.wait_for(consumer.__aiter__().__anext__(), 0.05)
                except asyncio.TimeoutError:
                    continue
                got.append(bytes(r.data))
                r.ack()
            await putting
            assert consumer.stats().unacked == 0
        finally:
            consumer.shutdown()
        return got

    got = asyncio.run(consume())
    assert got == [b"r%05d" % i for i in range(20)], "a record lost, or out of order"


def test_async_iteration_leaves_an_applications_sigterm_handler_alone(emulators, names, options):
    """An application's own SIGTERM handler stays in place through async iterations (one
    broken out of, then another); with none, SIGTERM stops the consumer while one runs and the
    default action is back after it."""
    stream, app = names("s"), names("app")
    emulators.kinesis.create_stream(stream, 1)
    put_numbered(emulators, stream, 2)

    def mine(signum, frame):  # the application's
        pass

    async def iterate_twice(consumer) -> None:
        async for r in consumer:
            r.ack()
            break
        async for r in consumer:
            r.ack()
            break

    previous = signal.signal(signal.SIGTERM, mine)
    consumer = kcl.PullConsumer(stream=stream, app=app, **options)
    try:
        consumer.start()
        asyncio.run(iterate_twice(consumer))
        assert signal.getsignal(signal.SIGTERM) is mine
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        put_numbered(emulators, stream, 1)

        async def stop_by_sigterm() -> int:
            n = 0
            async for r in consumer:
                r.ack()
                n += 1
                os.kill(os.getpid(), signal.SIGTERM)  # begins the stop; the loop ends
            return n

        assert asyncio.run(asyncio.wait_for(stop_by_sigterm(), 60)) >= 1
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    finally:
        consumer.shutdown()
        signal.signal(signal.SIGTERM, previous)


def test_an_ack_after_the_shard_moved_on_is_no_asyncio_cancellation(emulators, names, options):
    """An ack refused as too late (the consumer stopped past its drain bound) raised a class
    that is also an asyncio.CancelledError: a task acking late was taken as cancelled (a
    TaskGroup dropped it, asyncio.run ended). Now it is kcl.AckCancelledError alone."""
    stream, app = names("s"), names("app")
    emulators.kinesis.create_stream(stream, 1)
    put_numbered(emulators, stream, 1)
    consumer = kcl.PullConsumer(stream=stream, app=app, shutdown_ack_timeout=0, **options)
    consumer.start()
    r = consumer.next(60)
    assert r is not None
    consumer.shutdown()

    async def ack_late() -> None:
        r.ack()

    with pytest.raises(kcl.AckCancelledError) as raised:
        asyncio.run(ack_late())
    assert not isinstance(raised.value, asyncio.CancelledError)
    assert raised.value.code == "CANCELLED"


def test_pull_options_are_checked():
    with pytest.raises(kcl.ConfigError) as e:
        kcl.PullConsumer(stream="s", app="app", checkpoint_interval=0, max_unacked_per_shard=-1)
    assert any("checkpoint_interval" in p for p in e.value.problems), e.value.problems
    assert any("max_unacked_per_shard" in p for p in e.value.problems), e.value.problems
