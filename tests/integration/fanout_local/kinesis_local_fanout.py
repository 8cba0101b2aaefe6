#!/usr/bin/env python3
"""`kcl consume --fan-out` against kinesis-local (SubscribeToShard over HTTP/2) and dynalite,
as a user runs it, inside a network namespace of its own (kinesis-local listens on every
interface and has no setting for it).

  unshare -n python3 kinesis_local_fanout.py --kcl build/release/tools/kcl/kcl --node-modules node_modules

1. A fleet of two workers of one application reads a 4-shard stream with --fan-out to the
   end: once the two hold two leases each, the records are written; every record is
   delivered exactly once (a duplicate fails the phase), in order per partition key within
   each worker's output, and after a graceful stop each shard's checkpoint in the lease
   table (read from dynalite directly) is that shard's last record.
2. A worker of that application started again resumes from its checkpoints over fan-out:
   it prints the records written since, none of the earlier ones.
3. A second application (its own consumer) reads the same stream at the same time as a
   third: each gets every record.
Prints what it measured; exits 1 on a failure.
"""
import argparse
import base64
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

KL_PORT, KL_TLS_PORT, DDB_PORT = 4567, 4568, 4569


def wait_port(port, timeout=60):
    until = time.time() + timeout
    while time.time() < until:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.2)
    return False


def lines(path):
    out = []
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    out.append(json.loads(line))
    except FileNotFoundError:
        pass
    return out


def scan_table(table):
    """Every item of a DynamoDB table in dynalite, as {attribute: plain value}. dynalite checks
    that a request is signed in form only, so a fixed Authorization header does."""
    items, start = [], None
    while True:
        body = {"TableName": table}
        if start:
            body["ExclusiveStartKey"] = start
        req = urllib.request.Request(
            "http://127.0.0.1:%d/" % DDB_PORT, data=json.dumps(body).encode(),
            headers={"Content-Type": "application/x-amz-json-1.0",
                     "X-Amz-Target": "DynamoDB_20120810.Scan",
                     "X-Amz-Date": "20240101T000000Z",
                     "Authorization": "AWS4-HMAC-SHA256 Credential=AKIDLOCAL/20240101/"
                                      "us-east-1/dynamodb/aws4_request, "
                                      "SignedHeaders=host;x-amz-date;x-amz-target, "
                                      "Signature=00"})
        try:
            page = json.loads(urllib.request.urlopen(req, timeout=10).read())
        except urllib.error.HTTPError as e:
            raise RuntimeError("Scan of %s: HTTP %d %s" % (table, e.code, e.read()[:200]))
        for item in page.get("Items", []):
            items.append({k: next(iter(v.values())) for k, v in item.items()})
        start = page.get("LastEvaluatedKey")
        if not start:
            return items


def leases(table):
    """The lease table's items; none while the table is not there yet."""
    try:
        return scan_table(table)
    except RuntimeError:
        return []


def wait_for(cond, timeout, step=0.2):
    until = time.time() + timeout
    while time.time() < until:
        if cond():
            return True
        time.sleep(step)
    return cond()


def stop(p):
    """SIGTERM (a graceful stop), then the exit status; -9 when it had to be killed."""
    p.send_signal(signal.SIGTERM)
    try:
        return p.wait(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        return -9


def count_actions(log_path):
    """Requests kinesis-local handled, by action (from its DEBUG log)."""
    counts = {}
    try:
        with open(log_path, errors="replace") as f:
            for line in f:
                m = re.search(r"Processing (\w+) request", line)
                if m:
                    counts[m.group(1)] = counts.get(m.group(1), 0) + 1
    except FileNotFoundError:
        pass
    return counts


def start_emulators(node_modules, work, log_level=None):
    """kinesis-local (its log in work/kl.log; LOG_LEVEL=DEBUG logs each request's action, as
    count_actions() reads) and dynalite on loopback; the processes."""
    kl_env = dict(os.environ, KINESIS_MOCK_PLAIN_PORT=str(KL_PORT),
                  KINESIS_MOCK_TLS_PORT=str(KL_TLS_PORT), LOAD_DATA_IF_EXISTS="false",
                  SHOULD_PERSIST_DATA="false")
    if log_level:
        kl_env["LOG_LEVEL"] = log_level
    procs = [subprocess.Popen(["node", "main.js"], cwd=os.path.join(node_modules, "kinesis-local"),
                              env=kl_env, stdout=open(os.path.join(work, "kl.log"), "w"),
                              stderr=subprocess.STDOUT),
             subprocess.Popen(["node", os.path.join(node_modules, "dynalite", "cli.js"),
                               "--host", "127.0.0.1", "--port", str(DDB_PORT)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    return procs


def aws_env():
    env = dict(os.environ, AWS_REGION="us-east-1", AWS_ACCESS_KEY_ID="AKIDLOCAL",
               AWS_SECRET_ACCESS_KEY="local-secret",
               AWS_ENDPOINT_URL_KINESIS="http://127.0.0.1:%d" % KL_PORT,
               AWS_ENDPOINT_URL_DYNAMODB="http://127.0.0.1:%d" % DDB_PORT)
    env.pop("AWS_PROFILE", None)
    return env


def run_checks(title, prefix, body, log_level=None):
    """The frame of a kinesis-local test: parses --kcl and --node-modules, brings the loopback
    up (in the namespace `unshare -n` made), starts the emulators, runs
    body(kcl, env, work, procs, check) and kills what is left running; prints the outcome and
    returns the exit status (1 on a failed check)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--kcl", required=True)
    ap.add_argument("--node-modules", required=True)
    a = ap.parse_args()
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    work = tempfile.mkdtemp(prefix=prefix)
    procs = start_emulators(a.node_modules, work, log_level)
    failures = []

    def check(ok, what):
        print(("ok   " if ok else "FAIL ") + what, flush=True)
        if not ok:
            failures.append(what)

    try:
        if not (wait_port(KL_PORT) and wait_port(DDB_PORT)):
            print("kinesis-local or dynalite did not start", file=sys.stderr)
            return 1
        body(a.kcl, aws_env(), work, procs, check)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    if failures:
        print("%s: %d failure(s); logs in %s" % (title, len(failures), work))
        return 1
    print("%s: all checks passed" % title)
    return 0


def checks(kcl, env, work, procs, check):
    stream = "fanout-%d" % os.getpid()
    subprocess.run([kcl, "create-stream", "--stream", stream, "--shards", "4"], env=env,
                   check=True, stdout=subprocess.DEVNULL)

    def put(first, n):
        body = "".join(json.dumps({"key": "k%d" % (i % 40), "i": i}) + "\n"
                       for i in range(first, first + n))
        subprocess.run([kcl, "put", "--stream", stream, "--key-field", "key", "--quiet"],
                       env=env, input=body.encode(), check=True, stdout=subprocess.DEVNULL)

    def consume(app, consumer, name):
        out = os.path.join(work, name + ".out")
        p = subprocess.Popen([kcl, "consume", "--stream", stream, "--app", app, "--fan-out",
                              "--consumer-name", consumer, "--from", "trim-horizon",
                              "--checkpoint-interval", "0", "--failover-ms", "4000"],
                             env=env, stdout=open(out, "w"),
                             stderr=open(os.path.join(work, name + ".err"), "w"))
        procs.append(p)
        return p, out

    def records(paths, with_position=False):
        got = []
        for path in paths:
            for r in lines(path):
                rec = json.loads(base64.b64decode(r["data"]))
                if with_position:
                    rec["shard"], rec["seq"] = r["shardId"], r["sequenceNumber"]
                got.append(rec)
        return got

    # 1. A fleet of two reads everything, each record once. The records are written
    # once the fleet has formed (two leases each): a lease that moves while records flow
    # may deliver some twice, which this phase does not allow.
    w1, o1 = consume("appA", "consumer-a-%d" % os.getpid(), "w1")
    w2, o2 = consume("appA", "consumer-a-%d" % os.getpid(), "w2")

    def balanced():
        owners = {}
        held = leases("appA")
        for lease in held:
            owners[lease.get("leaseOwner")] = owners.get(lease.get("leaseOwner"), 0) + 1
        return len(held) == 4 and None not in owners and sorted(owners.values()) == [2, 2]
    check(wait_for(balanced, 120), "the two workers hold two of the four leases each")
    put(0, 400)
    t0 = time.time()
    ok = wait_for(lambda: len({r["i"] for r in records([o1, o2])}) >= 400, 120)
    took = time.time() - t0
    check(ok, "fleet of two read all 400 records over fan-out (%.1f s)" % took)
    for path in (o1, o2):
        per_key = {}
        ordered = True
        for r in records([path]):
            last = per_key.get(r["key"], -1)
            if r["i"] < last:
                ordered = False
            per_key[r["key"]] = r["i"]
        check(ordered, "records of each key in order in %s" % os.path.basename(path))
    check(stop(w1) == 0 and stop(w2) == 0, "both workers stopped gracefully")
    both = records([o1, o2], with_position=True)
    check(len({r["i"] for r in both}) == 400, "every record delivered")
    seen, duplicates = set(), []
    for r in both:
        if r["i"] in seen:
            duplicates.append(r["i"])
        seen.add(r["i"])
    check(not duplicates, "no record delivered twice (%d duplicates%s)" %
          (len(duplicates), ", e.g. i=%s" % sorted(duplicates)[:5] if duplicates else ""))
    last_of_shard = {}
    for r in both:
        if int(r["seq"]) > int(last_of_shard.get(r["shard"], "0")):
            last_of_shard[r["shard"]] = r["seq"]
    checkpoints = {lease["leaseKey"]: lease.get("checkpoint") for lease in leases("appA")}
    check(len(last_of_shard) == 4 and checkpoints == last_of_shard,
          "each shard's checkpoint in the lease table is its last record (%s)" %
          (", ".join("%s: checkpoint %s, last record %s" %
                     (k, checkpoints.get(k), last_of_shard.get(k))
                     for k in sorted(set(checkpoints) | set(last_of_shard))
                     if checkpoints.get(k) != last_of_shard.get(k)) or "all 4 match"))

    # 2. A restarted worker resumes from its checkpoints.
    put(400, 100)
    w3, o3 = consume("appA", "consumer-a-%d" % os.getpid(), "w3")
    ok = wait_for(lambda: len({r["i"] for r in records([o3])}) >= 100, 120)
    check(stop(w3) == 0, "restarted worker stopped gracefully")
    again = [r["i"] for r in records([o3])]
    check(ok and set(again) == set(range(400, 500)),
          "the restarted worker printed the 100 new records and none of the 400 before "
          "(got %d records, %d of them old)" % (len(again), len([i for i in again if i < 400])))

    # 3. Two applications at once, each with its own consumer.
    b, ob = consume("appB", "consumer-b-%d" % os.getpid(), "b")
    c, oc = consume("appC", "consumer-c-%d" % os.getpid(), "c")
    ok = wait_for(lambda: len({r["i"] for r in records([ob])}) >= 500 and
                  len({r["i"] for r in records([oc])}) >= 500, 120)
    check(ok, "two applications read the same stream at once, each all 500 records")
    check(stop(b) == 0 and stop(c) == 0, "both applications stopped gracefully")
    listed = subprocess.run([kcl, "consumers", "--stream", stream], env=env,
                            capture_output=True, text=True).stdout
    check(all(("consumer-%s-%d" % (x, os.getpid())) in listed for x in "abc"),
          "kcl consumers lists the three consumers")


def main():
    return run_checks("kinesis-local fan-out", "kcl-fanout-", checks)


if __name__ == "__main__":
    sys.exit(main())
