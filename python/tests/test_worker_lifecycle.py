"""A worker's life: Ctrl-C and SIGTERM during a batch, two worker processes sharing a
stream (join, SIGKILL of one), a lease lost mid-batch, a shard's end after a split."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from typing import Any, Dict, List, Set

import pytest

import kcl
from conftest import Running, wait_until

HERE = os.path.dirname(os.path.abspath(__file__))


def lines(path: str) -> List[str]:
    try:
        with open(path) as f:
            return [line.rstrip("\n") for line in f if line.endswith("\n")]
    except FileNotFoundError:
        return []


def processed(path: str) -> Set[str]:
    return {line.split(" ", 2)[2] for line in lines(path) if not line.startswith("event ")}


def child(emulators, stream, app, out, *extra) -> subprocess.Popen:
    env = emulators.env()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [env.get("PYTHONPATH"), HERE]))
    return subprocess.Popen([sys.executable, os.path.join(HERE, "worker_child.py"), stream, app,
                             out, *extra], env=env)


def put_numbered(emulators, stream, n, start=0):
    return emulators.kinesis.put_records(
        stream, [("key-%d" % i, b"r%05d" % i) for i in range(start, start + n)])


# run(), and start() then wait() (SIGTERM killed the process in wait(): no final checkpoint,
# the lease held until it expired), and wait(30) in a loop (Ctrl-C was seen only when the 30 s
# had passed, as a KeyboardInterrupt that skipped the graceful stop).
@pytest.mark.parametrize("sig,style", [(signal.SIGINT, "run"), (signal.SIGTERM, "run"),
                                       (signal.SIGTERM, "wait"), (signal.SIGINT, "wait30")])
def test_a_signal_during_a_batch_stops_the_worker_gracefully(emulators, names, tmp_path, sig,
                                                              style):
    stream, app = names("s"), names("app")
    emulators.kinesis.create_stream(stream, 1)
    put = put_numbered(emulators, stream, 50)
    out = str(tmp_path / "out")
    # One worker, nothing to fail over to: a long failover keeps a heartbeat delayed on a
    # loaded machine from costing the lease mid-batch (what this test checks is the stop).
    p = child(emulators, stream, app, out, "--batch-sleep", "1.5", "--max-records", "10",
              "--failover", "10",
              *({"wait": ["--wait"], "wait30": ["--wait", "--wait-timeout", "30"]}.get(style, [])))
    try:
        wait_until(lambda: any(line.startswith("event batch") for line in lines(out)),
                   what="the first batch")
        p.send_signal(sig)  # while the batch sleeps
        assert p.wait(60) == 0
    finally:
        if p.poll() is None:
            p.kill()
    events = [line for line in lines(out) if line.startswith("event ")]
    assert events[-1] == "event run_returned"
    assert "event shutdown_requested %s" % put[0]["ShardId"] in events
    done = [line.split(" ")[1] for line in lines(out) if not line.startswith("event ")]
    assert len(done) == 10, "the batch in progress finished; no other began"
    lease = emulators.dynamodb.leases(app)[put[0]["ShardId"]]
    assert lease["checkpoint"] == put[9]["SequenceNumber"]
    assert lease["owner"] is None, "the lease was handed back"


def test_two_workers_share_a_stream_and_one_survives_a_sigkill(emulators, names, tmp_path):
    stream, app = names("s"), names("app")
    emulators.kinesis.create_stream(stream, 4)
    put_numbered(emulators, stream, 400)
    a_out, b_out = str(tmp_path / "a"), str(tmp_path / "b")
    slow = ("--batch-sleep", "0.3", "--max-records", "5")
    a = child(emulators, stream, app, a_out, *slow, "--worker-id", "A")
    b = None
    try:
        wait_until(lambda: any(line.startswith("event batch") for line in lines(a_out)))
        b = child(emulators, stream, app, b_out, *slow, "--worker-id", "B")
        # The second worker joins: it gets shards of its own.
        wait_until(lambda: any(line.startswith("event batch") for line in lines(b_out)),
                   timeout=60, what="worker B processing")
        a.send_signal(signal.SIGKILL)
        a.wait(10)
        # B takes A's shards over and finishes the stream.
        want = {"r%05d" % i for i in range(400)}
        wait_until(lambda: want <= processed(a_out) | processed(b_out), timeout=90,
                   what="every record processed by A or B")
        owners = {v["owner"] for v in emulators.dynamodb.leases(app).values()}
        assert owners == {"B"}
        assert processed(a_out) - processed(b_out), "A processed some records itself"
    finally:
        for p in (a, b):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()


def test_a_lease_lost_mid_batch(emulators, names, options):
    stream, app = names("s"), names("app")
    emulators.kinesis.create_stream(stream, 1)
    put = put_numbered(emulators, stream, 5)
    shard = put[0]["ShardId"]
    in_batch, release = threading.Event(), threading.Event()
    outcome: Dict[str, Any] = {}

    class Slow(kcl.RecordProcessor):
        def process_records(self, batch, checkpointer):
            if "checkpoint" in outcome:
                return
            in_batch.set()
            release.wait(60)
            try:
                checkpointer.checkpoint()
                outcome["checkpoint"] = "written"
            except kcl.LeaseLostError as e:
                outcome["checkpoint"] = e

        def lease_lost(self):
            outcome["lease_lost"] = True

    opts = dict(options, lease_assignment="worker_takes", failover_time=10.0)
    running = Running(kcl.Worker(stream=stream, app=app, processor_factory=Slow, **opts))
    assert in_batch.wait(60)
    # Another worker takes the lease while the batch runs.
    emulators.dynamodb.call("UpdateItem", {
        "TableName": app, "Key": {"leaseKey": {"S": shard}},
        "UpdateExpression": "SET leaseOwner = :o, leaseCounter = leaseCounter + :n",
        "ExpressionAttributeValues": {":o": {"S": "thief"}, ":n": {"N": "1000"}}})
    release.set()
    wait_until(lambda: "lease_lost" in outcome, what="lease_lost()")
    running.stop()
    assert isinstance(outcome["checkpoint"], kcl.LeaseLostError), outcome
    assert outcome["checkpoint"].code == "LEASE_LOST"
    lease = emulators.dynamodb.leases(app)[shard]
    assert lease["checkpoint"] == "TRIM_HORIZON", "a worker that lost its lease wrote nothing"


def test_shard_end_after_a_split(emulators, names, options):
    stream, app = names("s"), names("app")
    emulators.kinesis.create_stream(stream, 1)
    parent = put_numbered(emulators, stream, 30)[0]["ShardId"]
    seen: List[Any] = []
    ended: List[str] = []
    lock = threading.Lock()

    class Keep(kcl.RecordProcessor):
        def initialize(self, input):
            self.shard = input.shard_id

        def process_records(self, batch, checkpointer):
            with lock:
                seen.extend((self.shard, bytes(r.data)) for r in batch)
            checkpointer.checkpoint()

        def shard_ended(self, checkpointer):
            ended.append(self.shard)
            super().shard_ended(checkpointer)  # checkpoints SHARD_END

    running = Running(kcl.Worker(stream=stream, app=app, processor_factory=Keep, **options))
    wait_until(lambda: len(seen) >= 30)
    emulators.kinesis.split_shard(stream, parent)
    put_numbered(emulators, stream, 30, start=30)
    wait_until(lambda: len(seen) >= 60, what="the children's records")
    wait_until(lambda: ended == [parent], what="shard_ended of the parent")
    running.stop()
    assert sorted(d for _, d in seen) == [b"r%05d" % i for i in range(60)]
    assert {s for s, d in seen if d >= b"r00030"}.isdisjoint({parent})
    leases = emulators.dynamodb.leases(app)
    assert leases[parent]["checkpoint"] == "SHARD_END"
    assert len(leases) == 3
