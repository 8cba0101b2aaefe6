"""kcl.kclpy: amazon_kclpy applications, written here as their users write them, run in process
by `python3 -m kcl.kclpy app.properties` against the emulators: a version 3 processor through
a shard split and SIGTERM, an original-interface processor in two runners of which one is
SIGKILLed, checkpoint errors named as the MultiLangDaemon names them, processors that raise
or exit, and the same program as the children of `kcl multilang` (--child)."""
from __future__ import annotations

import base64
import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
from typing import Any, Dict, List, Set

import pytest

import kcl
from kcl import kclpy
from conftest import wait_until

V3_APP = '''
import json, os, sys
from amazon_kclpy import kcl
from amazon_kclpy.v3 import processor

OUT = os.environ["KCLPY_TEST_OUT"]

def event(**kw):
    kw["pid"] = os.getpid()
    with open(OUT, "a") as f:
        f.write(json.dumps(kw) + "\\n")

class RecordProcessor(processor.RecordProcessorBase):
    def __init__(self):
        self.shard = None
        self.batches = 0

    def initialize(self, initialize_input):
        fresh = self.shard is None
        self.shard = initialize_input.shard_id
        event(e="initialize", shard=self.shard, seq=initialize_input.sequence_number,
              sub=initialize_input.sub_sequence_number, fresh=fresh, batches=self.batches)

    def process_records(self, process_records_input):
        self.batches += 1
        last = None
        for r in process_records_input.records:
            event(e="record", shard=self.shard, seq=r.sequence_number, sub=r.sub_sequence_number,
                  data=r.binary_data.decode(), b64=r.data, pk=r.partition_key,
                  ts=r.approximate_arrival_timestamp.timestamp(), ms=r.timestamp_millis,
                  lag=process_records_input.millis_behind_latest)
            last = r
        if last is not None:
            process_records_input.checkpointer.checkpoint(last.sequence_number,
                                                          last.sub_sequence_number)

    def lease_lost(self, lease_lost_input):
        event(e="lease_lost", shard=self.shard)

    def shard_ended(self, shard_ended_input):
        event(e="shard_ended", shard=self.shard)
        shard_ended_input.checkpointer.checkpoint()

    def shutdown_requested(self, shutdown_requested_input):
        event(e="shutdown_requested", shard=self.shard)
        shutdown_requested_input.checkpointer.checkpoint()

if __name__ == "__main__":
    event(e="main", argv=sys.argv)
    kcl.KCLProcess(RecordProcessor()).run()
    event(e="run_returned")
'''

V1_APP = '''
import base64, json, os
from amazon_kclpy import kcl

OUT = os.environ["KCLPY_TEST_OUT"]
WHO = os.environ["KCLPY_WHO"]

def event(**kw):
    kw["who"] = WHO
    with open(OUT, "a") as f:
        f.write(json.dumps(kw) + "\\n")

class RecordProcessor(kcl.RecordProcessorBase):
    def initialize(self, shard_id):
        self.shard = shard_id
        event(e="initialize", shard=shard_id)

    def process_records(self, records, checkpointer):
        for r in records:
            event(e="record", shard=self.shard, seq=r.get("sequenceNumber"),
                  sub=r["subSequenceNumber"], pk=r.get("partitionKey"),
                  data=base64.b64decode(r.get("data")).decode(),
                  ms=r.get("approximateArrivalTimestamp"))
        checkpointer.checkpoint()

    def shutdown(self, checkpointer, reason):
        event(e="shutdown", shard=self.shard, reason=reason)
        if reason == "TERMINATE":
            checkpointer.checkpoint()

    def shutdown_requested(self, checkpointer):
        event(e="shutdown_requested", shard=self.shard)
        checkpointer.checkpoint()

if __name__ == "__main__":
    kcl.KCLProcess(RecordProcessor()).run()
'''

ERRORS_APP = '''
import json, os, time
from amazon_kclpy import kcl
from amazon_kclpy.v3 import processor

OUT = os.environ["KCLPY_TEST_OUT"]
GO = os.environ["KCLPY_TEST_GO"]

def event(**kw):
    with open(OUT, "a") as f:
        f.write(json.dumps(kw) + "\\n")

class RecordProcessor(processor.RecordProcessorBase):
    def initialize(self, initialize_input):
        self.cp = None

    def try_checkpoint(self, cp, what, *args):
        try:
            cp.checkpoint(*args)
            event(e="written", what=what)
        except kcl.CheckpointError as e:
            event(e="error", what=what, value=e.value, text=str(e))

    def process_records(self, process_records_input):
        if self.cp is not None:
            return
        cp = self.cp = process_records_input.checkpointer
        self.try_checkpoint(cp, "not digits", "not-a-number")
        self.try_checkpoint(cp, "an int", 12345)
        self.try_checkpoint(cp, "after the last record", "9" * 60, 0)
        event(e="waiting")
        deadline = time.time() + 60
        while not os.path.exists(GO) and time.time() < deadline:
            time.sleep(0.05)
        self.try_checkpoint(cp, "after the lease was taken")

    def lease_lost(self, lease_lost_input):
        self.try_checkpoint(self.cp, "in lease_lost")
        event(e="lease_lost")

    def shard_ended(self, shard_ended_input):
        shard_ended_input.checkpointer.checkpoint()

    def shutdown_requested(self, shutdown_requested_input):
        pass

if __name__ == "__main__":
    kcl.KCLProcess(RecordProcessor()).run()
'''

RAISING_APP = '''
import json, os, sys
from amazon_kclpy import kcl
from amazon_kclpy.v3 import processor

OUT = os.environ["KCLPY_TEST_OUT"]

def event(**kw):
    with open(OUT, "a") as f:
        f.write(json.dumps(kw) + "\\n")

class RecordProcessor(processor.RecordProcessorBase):
    def __init__(self):
        self.exited = False

    def initialize(self, initialize_input):
        pass

    def process_records(self, process_records_input):
        records = process_records_input.records
        for r in records:
            event(e="record", data=r.binary_data.decode())
        datas = [r.binary_data for r in records]
        if b"boom" in datas:
            raise ValueError("boom in the batch")
        if b"exit" in datas and not self.exited:
            self.exited = True
            sys.exit(3)
        process_records_input.checkpointer.checkpoint()

    def lease_lost(self, lease_lost_input):
        pass

    def shard_ended(self, shard_ended_input):
        shard_ended_input.checkpointer.checkpoint()

    def shutdown_requested(self, shutdown_requested_input):
        shutdown_requested_input.checkpointer.checkpoint()

if __name__ == "__main__":
    kcl.KCLProcess(RecordProcessor()).run()
'''

# kcl.Worker options over the properties file's: short intervals so the tests run fast.
FAST = ["--option", "scheduler_interval=0.1", "--option", "min_call_interval=0.02",
        "--option", "failure_backoff_base=0.05", "--option", "failure_backoff_max=0.2"]


def write_app(tmp_path, app_text: str, stream: str, app: str, **extra: str) -> str:
    (tmp_path / "app.py").write_text(textwrap.dedent(app_text))
    props = dict(executableName="app.py", streamName=stream, applicationName=app,
                 AwsCredentialsProvider="DefaultCredentialsProvider",
                 processingLanguage="python/3.11", initialPositionInStream="TRIM_HORIZON",
                 regionName="us-east-1", failoverTimeMillis="3000",
                 shardSyncIntervalMillis="1000", idleTimeBetweenReadsInMillis="50",
                 parentShardPollIntervalMillis="100")
    props.update(extra)
    path = tmp_path / "app.properties"
    path.write_text("# an amazon_kclpy application's properties\n" +
                    "".join("%s = %s\n" % kv for kv in props.items()))
    return str(path)


def start(emulators, properties: str, out: str, *args: str, **env: str) -> subprocess.Popen:
    e = emulators.env()
    e.update(KCLPY_TEST_OUT=out, **env)
    # Another directory than the application's: the runner finds app.py next to the file.
    return subprocess.Popen([sys.executable, "-m", "kcl.kclpy", properties, *FAST, *args],
                            env=e, cwd="/", stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def events(path: str) -> List[Dict[str, Any]]:
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.endswith("\n")]
    except FileNotFoundError:
        return []


def stop(p: subprocess.Popen, sig: int = signal.SIGTERM) -> str:
    p.send_signal(sig)
    try:
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    return err


def assert_lease_lost_ends(evs: List[Dict[str, Any]], shards: Set[str]) -> None:
    """A graceful stop: each shard's processor hears shutdown_requested, then lease_lost (the
    worker lets the lease go), as under the MultiLangDaemon."""
    for shard in shards:
        ends = [e["e"] for e in evs if e.get("shard") == shard
                and e["e"] in ("shutdown_requested", "lease_lost")]
        assert ends == ["shutdown_requested", "lease_lost"], (shard, ends)


def test_a_v3_processor_through_a_split_and_sigterm(emulators, names, tmp_path):
    stream, app = names("s"), names("app")
    emulators.kinesis.create_stream(stream, 1)
    put = emulators.kinesis.put_records(stream, [("key-%d" % i, b"r%03d" % i)
                                                 for i in range(40)])
    out = str(tmp_path / "out")
    p = start(emulators, write_app(tmp_path, V3_APP, stream, app), out)
    try:
        def records():
            return [e for e in events(out) if e["e"] == "record"]
        wait_until(lambda: len(records()) >= 40, what="the first 40 records")
        for e in records():
            assert base64.b64decode(e["b64"]).decode() == e["data"]
            assert e["pk"] == "key-%d" % int(e["data"][1:])
            assert abs(e["ts"] * 1000 - e["ms"]) < 1000 and e["ms"] > 1.6e12
        inits = [e for e in events(out) if e["e"] == "initialize"]
        assert [e["seq"] for e in inits] == ["TRIM_HORIZON"]
        main = [e for e in events(out) if e["e"] == "main"]
        assert main[0]["pid"] == inits[0]["pid"] == p.pid, "in the runner's process"
        assert main[0]["argv"][0].endswith("app.py")

        parent = put[0]["ShardId"]
        emulators.kinesis.split_shard(stream, parent)
        emulators.kinesis.put_records(stream, [("key-%d" % i, b"r%03d" % i)
                                               for i in range(40, 80)])
        wait_until(lambda: len(records()) >= 80, what="the records after the split")
        wait_until(lambda: any(e["e"] == "shard_ended" and e["shard"] == parent
                               for e in events(out)), what="shard_ended of the parent")
        wait_until(lambda: emulators.dynamodb.leases(app).get(parent, {}).get("checkpoint")
                   == "SHARD_END", what="the parent checkpointed at SHARD_END")
        err = stop(p)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err
    got = sorted(e["data"] for e in records())
    assert got == ["r%03d" % i for i in range(80)], "every record once"
    evs = events(out)
    inits = [e for e in evs if e["e"] == "initialize"]
    assert len(inits) == 3 and len({e["shard"] for e in inits}) == 3
    assert all(e["fresh"] and e["batches"] == 0 for e in inits), \
        "one processor instance per shard, each a copy of the untouched one"
    assert evs[-1]["e"] == "run_returned", "KCLProcess.run() returned after SIGTERM"
    open_shards = {s for s, v in emulators.dynamodb.leases(app).items()
                   if v["checkpoint"] != "SHARD_END"}
    assert len(open_shards) == 2
    assert {e["shard"] for e in evs if e["e"] == "shutdown_requested"} == open_shards
    assert_lease_lost_ends(evs, open_shards)
    last: Dict[str, str] = {}
    for e in records():
        last[e["shard"]] = e["seq"]
    leases = emulators.dynamodb.leases(app)
    for shard in open_shards:
        if shard in last:
            assert leases[shard]["checkpoint"] == last[shard]
    assert "running RecordProcessor (amazon_kclpy interface version 3) in process" in err


def test_an_original_interface_processor_survives_a_sigkill_of_its_runner(emulators, names,
                                                                           tmp_path):
    stream, app = names("s"), names("app")
    emulators.kinesis.create_stream(stream, 2)
    emulators.kinesis.put_records(stream, [("k%d" % i, b"a%03d" % i) for i in range(30)])
    out = str(tmp_path / "out")
    props = write_app(tmp_path, V1_APP, stream, app)

    def seen(who=None):
        return [e for e in events(out) if e["e"] == "record" and who in (None, e["who"])]

    a = start(emulators, props, out, KCLPY_WHO="a")
    b = None
    try:
        wait_until(lambda: len(seen("a")) >= 30, what="runner a's records")
        for e in seen():
            assert e["pk"] == "k%d" % int(e["data"][1:]) and isinstance(e["sub"], int)
            assert e["ms"] > 1.6e12
        b = start(emulators, props, out, KCLPY_WHO="b")
        wait_until(lambda: any(e["e"] == "initialize" and e["who"] == "b"
                               for e in events(out)), timeout=60, what="runner b's first shard")
        a.kill()  # SIGKILL: no shutdown, its remaining lease expires
        a.wait(30)
        emulators.kinesis.put_records(stream, [("k%d" % i, b"a%03d" % i)
                                               for i in range(30, 60)])
        wait_until(lambda: {e["data"] for e in seen()} >= {"a%03d" % i for i in range(60)},
                   timeout=90, what="every record, the later ones by runner b")
        wait_until(lambda: len({v["owner"] for v in emulators.dynamodb.leases(app).values()})
                   == 1, what="runner b holding both shards")
        err = stop(b)
        assert b.returncode == 0, err
    finally:
        for p in (a, b):
            if p is not None and p.poll() is None:
                p.kill()
    later = {e["data"] for e in seen("b")}
    assert {"a%03d" % i for i in range(30, 60)} <= later
    evs = events(out)
    assert {e["shard"] for e in evs if e["e"] == "shutdown_requested" and e["who"] == "b"} \
        == set(emulators.dynamodb.leases(app))
    # a ZOMBIE shutdown (lease taken by b while a ran) never checkpoints; its reason is right
    assert all(e["reason"] in ("ZOMBIE", "TERMINATE") for e in evs if e["e"] == "shutdown")


def test_checkpoint_errors_carry_the_daemons_values(emulators, names, tmp_path):
    stream, app = names("s"), names("app")
    emulators.kinesis.create_stream(stream, 1)
    shard = emulators.kinesis.put_records(stream, [("k", b"x%d" % i) for i in range(5)])[0][
        "ShardId"]
    out, go = str(tmp_path / "out"), str(tmp_path / "go")
    props = write_app(tmp_path, ERRORS_APP, stream, app, failoverTimeMillis="10000")
    p = start(emulators, props, out, "--option", "lease_assignment='worker_takes'",
              KCLPY_TEST_GO=go)
    try:
        wait_until(lambda: any(e["e"] == "waiting" for e in events(out)), what="the batch")
        emulators.dynamodb.call("UpdateItem", {
            "TableName": app, "Key": {"leaseKey": {"S": shard}},
            "UpdateExpression": "SET leaseOwner = :o, leaseCounter = leaseCounter + :n",
            "ExpressionAttributeValues": {":o": {"S": "thief"}, ":n": {"N": "1000"}}})
        open(go, "w").close()
        wait_until(lambda: any(e["e"] == "lease_lost" for e in events(out)), what="lease_lost")
        err = stop(p)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err
    got = [(e["what"], e.get("value")) for e in events(out) if e["e"] in ("error", "written")]
    assert got == [("not digits", "IllegalArgumentException"),
                   ("an int", "IllegalArgumentException"),
                   ("after the last record", "IllegalArgumentException"),
                   ("after the lease was taken", "ShutdownException"),
                   ("in lease_lost", "InvalidStateException")], got
    assert [e["text"] for e in events(out) if e["e"] == "error"][0] == \
        "'IllegalArgumentException'", "str() as amazon_kclpy's: the value's repr"
    assert emulators.dynamodb.leases(app)[shard]["checkpoint"] == "TRIM_HORIZON"


def test_processors_that_raise_or_exit(emulators, names, tmp_path):
    stream, app = names("s"), names("app")
    emulators.kinesis.create_stream(stream, 1)
    out = str(tmp_path / "out")
    p = start(emulators, write_app(tmp_path, RAISING_APP, stream, app), out)
    try:
        def datas():
            return [e["data"] for e in events(out) if e["e"] == "record"]
        emulators.kinesis.put_records(stream, [("k", b"a"), ("k", b"boom"), ("k", b"b")])
        wait_until(lambda: "b" in datas(), what="the batch that raises")
        emulators.kinesis.put_records(stream, [("k", b"c"), ("k", b"exit"), ("k", b"d")])
        wait_until(lambda: datas().count("d") >= 2, what="the batch after sys.exit, again")
        put = emulators.kinesis.put_records(stream, [("k", b"e")])
        wait_until(lambda: emulators.dynamodb.leases(app).get(put[0]["ShardId"], {})
                   .get("checkpoint") == put[0]["SequenceNumber"], what="the last checkpoint")
        assert p.poll() is None, "the runner goes on"
        err = stop(p)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err
    got = datas()
    # The batch that raised counts as processed (as under amazon_kclpy): not delivered again.
    assert got.count("a") == 1 and got.count("boom") == 1 and got.count("b") == 1, got
    # sys.exit() is a processor failure: the same batch again.
    assert got.count("c") == 2 and got.count("exit") == 2, got
    assert "Caught exception from action dispatch: boom in the batch" in err
    assert "ValueError: boom in the batch" in err
    assert "called sys.exit(3)" in err


def test_bad_properties_are_named(emulators, tmp_path):
    path = tmp_path / "bad.properties"
    path.write_text("streamName = s\nexecutableName = app.py\nfailoverTimeMillis = soon\n")
    r = subprocess.run([sys.executable, "-m", "kcl.kclpy", str(path)], env=emulators.env(),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert "applicationName is required" in r.stderr and "failoverTimeMillis" in r.stderr, \
        r.stderr
    path.write_text("streamName = s\napplicationName = a\nexecutableName = python3 nowhere.py\n")
    r = subprocess.run([sys.executable, "-m", "kcl.kclpy", str(path)], env=emulators.env(),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "nowhere.py is not a file" in r.stderr, r.stderr


def test_throttling_and_other_failures_map_as_the_daemon_maps_them():
    throttled = kcl.UnavailableError("slow down", aws={
        "error_type": "ProvisionedThroughputExceededException"})
    assert kclpy._error_name(throttled) == "ThrottlingException"
    assert kclpy._error_name(kcl.UnavailableError("5xx")) == \
        "KinesisClientLibDependencyException"
    assert kclpy._error_name(kcl.LeaseLostError("gone")) == "ShutdownException"
    assert kclpy._error_name(kcl.InternalError("?")) == "KinesisClientLibDependencyException"
    e = kclpy.CheckpointError("ThrottlingException")
    assert e.value == "ThrottlingException" and str(e) == "'ThrottlingException'"


def read_all_then_stop(emulators, p: subprocess.Popen, out: str, app: str, n: int,
                       last: Dict[str, str]) -> str:
    """Waits for `n` records and for each shard's checkpoint at its last record, then stops
    `p` with SIGTERM; returns its stderr."""
    try:
        wait_until(lambda: len([e for e in events(out) if e["e"] == "record"]) >= n,
                   what="the records")
        wait_until(lambda: {k: v["checkpoint"] for k, v in
                            emulators.dynamodb.leases(app).items()} == last,
                   what="the checkpoints")
        return stop(p)
    finally:
        if p.poll() is None:
            p.kill()


def test_the_same_program_as_a_kcl_multilang_child(emulators, names, tmp_path):
    """--child: kcl-cpp's amazon_kclpy child side, each shard's program in its own process
    under `kcl multilang`, speaking the MultiLangDaemon protocol."""
    stream, app = names("s"), names("app")
    emulators.kinesis.create_stream(stream, 2)
    put = emulators.kinesis.put_records(stream, [("key-%d" % i, b"r%03d" % i)
                                                 for i in range(30)])
    out = str(tmp_path / "out")
    props = write_app(tmp_path, V3_APP, stream, app, executableName="%s -m kcl.kclpy --child %s"
                      % (sys.executable, tmp_path / "app.py"))
    env = emulators.env()
    env["KCLPY_TEST_OUT"] = out
    p = subprocess.Popen([os.environ["KCL_CLI"], "multilang", props], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    last = {r["ShardId"]: r["SequenceNumber"] for r in put}
    err = read_all_then_stop(emulators, p, out, app, 30, last)
    assert p.returncode == 0, err
    evs = events(out)
    records = [e for e in evs if e["e"] == "record"]
    assert sorted(e["data"] for e in records) == ["r%03d" % i for i in range(30)]
    assert all(base64.b64decode(e["b64"]).decode() == e["data"] for e in records)
    pids = {e["pid"] for e in evs if e["e"] == "initialize"}
    assert len(pids) == 2 and p.pid not in pids, "a child process per shard"
    assert_lease_lost_ends(evs, set(last))
    assert {e["shard"] for e in evs if e["e"] == "shutdown_requested"} == set(last)


def test_kcl_multilang_in_process_runs_the_program_in_one_process(emulators, names, tmp_path):
    """`kcl multilang --in-process FILE`: the command becomes `python3 -m kcl.kclpy FILE` (the
    same process), the global options going with it as kcl.Worker options."""
    stream, app = names("s"), names("app")
    emulators.kinesis.create_stream(stream, 2)
    put = emulators.kinesis.put_records(stream, [("key-%d" % i, b"r%03d" % i)
                                                 for i in range(30)])
    out = str(tmp_path / "out")
    props = write_app(tmp_path, V3_APP, stream, app)
    env = emulators.env()
    env["KCLPY_TEST_OUT"] = out
    fast = [arg for pair in zip(FAST[::2], FAST[1::2]) for arg in pair]
    p = subprocess.Popen([os.environ["KCL_CLI"], "multilang", "--in-process", "--python",
                          sys.executable, props, *fast], env=env, cwd="/",
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    err = read_all_then_stop(emulators, p, out, app, 30,
                             {r["ShardId"]: r["SequenceNumber"] for r in put})
    assert p.returncode == 0, err
    evs = events(out)
    assert sorted(e["data"] for e in evs if e["e"] == "record") == \
        ["r%03d" % i for i in range(30)]
    assert {e["pid"] for e in evs if e["e"] == "initialize"} == {p.pid}, \
        "both shards in the process kcl multilang became"
    assert "in process" in err


def test_kcl_multilang_in_process_names_what_it_cannot_take(tmp_path):
    props = tmp_path / "app.properties"
    props.write_text("executableName = app.py\n")
    r = subprocess.run([os.environ["KCL_CLI"], "multilang", "--in-process", "--wire", "json",
                        str(props)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--wire" in r.stderr, r.stderr
    r = subprocess.run([os.environ["KCL_CLI"], "multilang", "--in-process", "--python",
                        str(tmp_path / "no-such-python"), str(props)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 127 and "no-such-python" in r.stderr, r.stderr


class _FakeCore:
    """A kcl.Checkpointer standing in for the core: records the checkpoints asked of it."""
    shard_id = "shardId-000000000000"

    def __init__(self) -> None:
        self.calls: List[tuple] = []

    def checkpoint(self, *args: Any) -> None:
        self.calls.append(args)


def test_a_sub_sequence_number_is_read_as_the_daemon_reads_it():
    core = _FakeCore()
    cp = kclpy.Checkpointer(core)
    cp.checkpoint("49590", 3)
    cp.checkpoint("49590", "3")  # Jackson reads a digit string as its number
    cp.checkpoint("49590", None)
    cp.checkpoint("49590")
    cp.checkpoint("49590", 2**64 - 1)
    assert core.calls == [("49590", 3), ("49590", 3), ("49590", 0), ("49590", 0),
                          ("49590", 2**64 - 1)]
    for bad in (-1, "-1", "3a", "", " 3", "٣", 1.5, 3.0, True, [3], 2**64,
                "12345678901234567890"):
        with pytest.raises(kclpy.CheckpointError) as e:
            cp.checkpoint("49590", bad)
        assert e.value.value == "IllegalArgumentException", bad
    assert len(core.calls) == 5, "a refused sub-sequence number checkpoints nothing"


class _SlotlessBase:
    __slots__ = ()


class _LockedProcessor(_SlotlessBase):
    """A processor deepcopy refuses (a lock), made with an argument its class has a default
    for: a copy made as `type(p)()` would run with table "default"."""
    version = 3

    def __init__(self, table: str = "default") -> None:
        self.table = table
        self.seen: List[str] = []
        self.lock = threading.Lock()
        self.rlock = threading.RLock()
        self.client = _Uncopyable()


class _Uncopyable:
    def __deepcopy__(self, memo: Any) -> Any:
        raise TypeError("cannot copy a client")


def test_a_processor_deepcopy_refuses_is_copied_with_its_attributes(caplog):
    template = _LockedProcessor(table="orders")
    make = kclpy._processor_copies(template)
    with caplog.at_level(logging.WARNING, logger="kcl.kclpy"):
        copies = [make()._calls._p for _ in range(3)]
    for p in copies:
        assert type(p) is _LockedProcessor and p is not template
        assert p.table == "orders"
        assert p.seen == [] and p.seen is not template.seen, "deep-copied where it can be"
        assert p.client is template.client, "shared where it cannot be copied"
    locks = [template.lock] + [p.lock for p in copies]
    assert len({id(lock) for lock in locks}) == 4, "each copy has a lock of its own"
    assert all(type(lock) is type(template.lock) for lock in locks)
    assert len({id(p.rlock) for p in copies + [template]}) == 4
    assert all(type(p.rlock) is type(template.rlock) for p in copies)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, "one warning, not one per shard: %r" % warnings
    assert "'client'" in warnings[0].getMessage() and "'lock'" in warnings[0].getMessage()
    assert "cannot copy a client" in warnings[0].getMessage()


class _NoDictProcessor:
    __slots__ = ("table",)

    def __init__(self, table: str = "default") -> None:
        self.table = table

    def __reduce_ex__(self, protocol: int) -> Any:
        raise TypeError("no copies of this one")


def test_a_processor_that_cannot_be_copied_at_all_is_made_anew_with_a_warning(caplog):
    make = kclpy._processor_copies(_NoDictProcessor(table="orders"))
    with caplog.at_level(logging.WARNING, logger="kcl.kclpy"):
        copies = [make()._calls._p for _ in range(2)]
    assert [p.table for p in copies] == ["default", "default"]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "_NoDictProcessor()" in warnings[0].getMessage(), warnings
