#!/usr/bin/env python3
"""`kcl consume --stream A --stream B --fan-out` against kinesis-local and dynalite: a worker
reading several streams with enhanced fan-out, inside a network namespace of its own (as
kinesis_local_fanout.py, whose helpers it uses).

  unshare -n python3 kinesis_local_multistream_fanout.py --kcl build/release/tools/kcl/kcl \\
      --node-modules node_modules

Two streams of two shards each, one application, two workers:
1. The four leases in the lease table have multi-stream keys
   (<account>:<stream>:<creation epoch>:<shard>), two per worker.
2. Each stream has a consumer named after the application, registered on that stream
   (`kcl consumers --stream X` lists it).
3. Records written to both streams are all delivered, once each, each under its own stream's
   name, and after a graceful stop each lease's checkpoint is its shard's last record.
4. A worker of a second application reads the streams named in a file (--streams-file),
   first A alone; B is added to the file and the worker told (SIGHUP): B's consumer is
   registered when its shards first subscribe, and every record of A and B is read.
5. Reading was by fan-out only: kinesis-local (LOG_LEVEL=DEBUG logs each request's action)
   served 0 GetRecords and at least one SubscribeToShard per lease and application.
Prints what it measured; exits 1 on a failure.
"""
import base64
import json
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kinesis_local_fanout import count_actions, leases, lines, run_checks, stop, wait_for  # noqa: E402


def checks(kcl, env, work, procs, check):
    tag = os.getpid()
    streams = ["msa-%d" % tag, "msb-%d" % tag]
    app = "msapp-%d" % tag  # also the consumers' name (unique per run: kinesis-local)
    for s in streams:
        subprocess.run([kcl, "create-stream", "--stream", s, "--shards", "2"], env=env,
                       check=True, stdout=subprocess.DEVNULL)

    def put(stream, first, n):
        body = "".join(json.dumps({"key": "k%d" % (i % 20), "s": stream, "i": i}) + "\n"
                       for i in range(first, first + n))
        subprocess.run([kcl, "put", "--stream", stream, "--key-field", "key", "--quiet"],
                       env=env, input=body.encode(), check=True, stdout=subprocess.DEVNULL)

    def consume(name, application=app, stream_args=None):
        out = os.path.join(work, name + ".out")
        cmd = [kcl, "consume", "--app", application, "--fan-out", "--from", "trim-horizon",
               "--checkpoint-interval", "0", "--failover-ms", "4000"]
        if stream_args is None:
            stream_args = [arg for s in streams for arg in ("--stream", s)]
        cmd += stream_args
        p = subprocess.Popen(cmd, env=env, stdout=open(out, "w"),
                             stderr=open(os.path.join(work, name + ".err"), "w"))
        procs.append(p)
        return p, out

    def records(paths):
        got = []
        for path in paths:
            for r in lines(path):
                rec = json.loads(base64.b64decode(r["data"]))
                rec["streamName"], rec["shard"] = r.get("streamName"), r["shardId"]
                rec["seq"] = r["sequenceNumber"]
                got.append(rec)
        return got

    w1, o1 = consume("w1")
    w2, o2 = consume("w2")

    def balanced():
        held = leases(app)
        owners = {}
        for lease in held:
            owners[lease.get("leaseOwner")] = owners.get(lease.get("leaseOwner"), 0) + 1
        return len(held) == 4 and None not in owners and sorted(owners.values()) == [2, 2]
    check(wait_for(balanced, 120), "the two workers hold two of the four leases each")
    keys = sorted(lease["leaseKey"] for lease in leases(app))
    key_form = re.compile(r"^\d+:(msa|msb)-%d:\d+:shardId-\d+$" % tag)
    check(len(keys) == 4 and all(key_form.match(k) for k in keys),
          "multi-stream lease keys account:stream:creationEpoch:shardId (%s)" % ", ".join(keys))

    for s in streams:
        listed = subprocess.run([kcl, "consumers", "--stream", s], env=env,
                                capture_output=True, text=True).stdout
        check(app in listed, "stream %s has consumer %s registered on it" % (s, app))

    put(streams[0], 0, 200)
    put(streams[1], 1000, 200)
    t0 = time.time()
    ok = wait_for(lambda: len({(r["s"], r["i"]) for r in records([o1, o2])}) >= 400, 120)
    took = time.time() - t0
    check(ok, "the two workers read all 400 records of the two streams over fan-out "
              "(%.1f s)" % took)
    check(stop(w1) == 0 and stop(w2) == 0, "both workers stopped gracefully")
    both = records([o1, o2])
    got = [(r["s"], r["i"]) for r in both]
    expected = {(streams[0], i) for i in range(200)} | {(streams[1], i)
                                                        for i in range(1000, 1200)}
    check(set(got) == expected, "every record of both streams delivered (%d of %d)" %
          (len(set(got) & expected), len(expected)))
    check(len(got) == len(set(got)), "no record delivered twice (%d duplicates)" %
          (len(got) - len(set(got))))
    wrong = [r for r in both if r["streamName"] != r["s"]]
    check(not wrong, "each record printed under its own stream's name (%d not)" % len(wrong))
    last = {}
    for r in both:
        k = (r["streamName"], r["shard"])
        if int(r["seq"]) > int(last.get(k, "0")):
            last[k] = r["seq"]
    checkpoints = {}
    for lease in leases(app):
        parts = lease["leaseKey"].split(":")
        checkpoints[(parts[1], parts[3])] = lease.get("checkpoint")
    check(checkpoints == last, "each lease's checkpoint is its shard's last record (%s)" %
          (", ".join("%s/%s: checkpoint %s, last %s" % (k[0], k[1], checkpoints.get(k),
                                                       last.get(k))
                     for k in sorted(set(checkpoints) | set(last))
                     if checkpoints.get(k) != last.get(k)) or "all 4 match"))

    # 4. A stream added while the worker runs (--streams-file, SIGHUP) gets its consumer when
    # its shards first subscribe, and is read by fan-out too.
    app2 = "msapp2-%d" % tag
    listing = os.path.join(work, "streams.txt")
    with open(listing, "w") as f:
        f.write(streams[0] + "\n")
    w3, o3 = consume("w3", app2, ["--streams-file", listing])
    # Once it reads A (so it leads its one-worker fleet: only the leader syncs shards of a
    # stream added later, and a stream added before it leads waits for the next periodic sync).
    check(wait_for(lambda: len({r["i"] for r in records([o3])}) >= 200, 120),
          "a worker of a second application reading the streams of a file read stream A's 200 "
          "records")
    with open(listing, "w") as f:
        f.write(streams[0] + "\n" + streams[1] + "\n")
    w3.send_signal(signal.SIGHUP)
    t0 = time.time()
    ok = wait_for(lambda: len({(r["s"], r["i"]) for r in records([o3])}) >= 400, 120)
    check(ok, "stream B added to the file (SIGHUP): all 400 records of A and B read over "
              "fan-out (%.1f s after the SIGHUP)" % (time.time() - t0))
    listed = subprocess.run([kcl, "consumers", "--stream", streams[1]], env=env,
                            capture_output=True, text=True).stdout
    check(app2 in listed, "stream B added later has consumer %s registered on it" % app2)
    check(stop(w3) == 0, "the worker stopped gracefully")

    actions = count_actions(os.path.join(work, "kl.log"))
    print("kinesis-local requests: " + ", ".join(
        "%s %d" % (k, v) for k, v in sorted(actions.items())), flush=True)
    check(actions.get("GetRecords", 0) == 0,
          "0 GetRecords calls (%d)" % actions.get("GetRecords", 0))
    check(actions.get("SubscribeToShard", 0) >= 8,
          "at least one SubscribeToShard per lease and application (%d)" %
          actions.get("SubscribeToShard", 0))
    # Two workers starting together may both try; the loser reuses the winner's. Then the
    # second application's two.
    check(4 <= actions.get("RegisterStreamConsumer", 0) <= 6,
          "RegisterStreamConsumer at most once per stream and worker (%d)" %
          actions.get("RegisterStreamConsumer", 0))


def main():
    return run_checks("kinesis-local multi-stream fan-out", "kcl-msfo-", checks,
                      log_level="DEBUG")


if __name__ == "__main__":
    sys.exit(main())
