#!/usr/bin/env python3
"""A fleet started together through the limits proxy: --workers `kcl consume` workers of one
new application, each reading --streams streams of --shards shards (one multi-stream lease
table; --streams 1 reads one stream in the one-stream format), all started at the same moment
through tools/scenario/limits_proxy.js in front of kinesalite and dynalite, which enforces
AWS's per-account, per-stream and per-shard limits (DescribeStreamSummary 20 calls/s per
account, ListShards 1,000/s per stream, GetShardIterator 5/s per shard, ...; docs/limits.md).

Prints, once every lease is held by a live worker and read (or --timeout passed):

  held: seconds from the start until every lease had a live worker as its owner
  read: seconds from the start until every shard had had a GetRecords call
  per API: calls, throttled, the peak calls in one second (the proxy's sliding window) and
           the limit it was held to
  start-up throttles: DescribeStreamSummary, ListShards, RegisterStreamConsumer,
           DescribeStreamConsumer and every other LimitExceededException of the control plane

Exits 0 when every lease was held and read within --max-held-s and the fleet's start-up drew no
control-plane throttle (the goal of a fleet that does not throttle itself), and, with
--check-describe-calls N, the fleet made at most N DescribeStreamSummary calls; 1 otherwise.

  python3 bench/fleet_start.py [--workers 40] [--streams 4] [--shards 50]
      [--build-dir build/release] [--max-held-s 30] [--timeout 120]
      [--check-describe-calls N] [--consume-arg ARG]...
"""
import argparse
import json
import os
import random
import signal
import string
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from catch_up import aws_call, proxy_stats, start_json_line, stop  # noqa: E402
import http.client  # noqa: E402
import subprocess  # noqa: E402
import urllib.parse  # noqa: E402

# The control-plane calls whose throttling a fleet's own start-up must never cause.
START_UP_APIS = ["kinesis.DescribeStreamSummary", "kinesis.ListShards", "kinesis.DescribeStream",
                 "kinesis.ListStreams", "kinesis.RegisterStreamConsumer",
                 "kinesis.DescribeStreamConsumer"]


def create_streams(kinesis_url, names, shards):
    for name in names:
        aws_call(kinesis_url, "Kinesis_20131202.CreateStream",
                 {"StreamName": name, "ShardCount": shards})
    for name in names:
        for _ in range(400):
            summary = aws_call(kinesis_url, "Kinesis_20131202.DescribeStreamSummary",
                               {"StreamName": name})["StreamDescriptionSummary"]
            if summary["StreamStatus"] == "ACTIVE":
                break
            time.sleep(0.05)
        else:
            sys.exit(f"fleet_start: stream {name} did not become ACTIVE")


def dynamodb_call(url, action, body):
    """One unsigned DynamoDB JSON call to dynalite; the parsed answer, or None when the table
    does not exist (yet)."""
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    try:
        conn.request("POST", "/", json.dumps(body).encode(), {
            "Content-Type": "application/x-amz-json-1.0",
            "X-Amz-Target": "DynamoDB_20120810." + action,
            "X-Amz-Date": time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()),
            "Authorization": "AWS4-HMAC-SHA256 Credential=AKIDBENCH/20240101/us-east-1/dynamodb/"
                             "aws4_request, SignedHeaders=host;x-amz-date, Signature=0000"})
        r = conn.getresponse()
        text = r.read()
        if r.status == 400 and b"ResourceNotFoundException" in text:
            return None
        if r.status != 200:
            raise RuntimeError(f"{action} answered HTTP {r.status}: {text[:300]!r}")
        return json.loads(text)
    finally:
        conn.close()


def lease_owners(dynamodb_url, table):
    """{leaseKey: owner or ''} from a Scan of the lease table, straight to dynalite (not
    through the proxy: the watcher is not part of the fleet); {} before the table exists."""
    owners, start = {}, None
    while True:
        body = {"TableName": table, "ProjectionExpression": "leaseKey, leaseOwner"}
        if start:
            body["ExclusiveStartKey"] = start
        page = dynamodb_call(dynamodb_url, "Scan", body)
        if page is None:
            return {}
        for item in page.get("Items", []):
            key = item["leaseKey"]["S"]
            if key.startswith("-"):  # not a lease (the Java KCL 3.5's single-table items)
                continue
            owners[key] = item.get("leaseOwner", {}).get("S", "")
        start = page.get("LastEvaluatedKey")
        if not start:
            return owners


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build", "release"))
    ap.add_argument("--kcl", default="", help="the kcl binary (default: BUILD_DIR/tools/kcl/kcl)")
    ap.add_argument("--workers", type=int, default=40)
    ap.add_argument("--streams", type=int, default=4)
    ap.add_argument("--shards", type=int, default=50, help="shards of each stream")
    ap.add_argument("--failover-ms", type=int, default=10000)
    ap.add_argument("--consume-arg", action="append", default=[],
                    help="one more argument for every kcl consume (repeat for several)")
    ap.add_argument("--max-held-s", type=float, default=30,
                    help="fail when the leases were not all held by live workers within this")
    ap.add_argument("--timeout", type=float, default=120,
                    help="seconds to wait for every lease to be held before giving up")
    ap.add_argument("--check-describe-calls", type=int, default=None,
                    help="also fail when the fleet made more DescribeStreamSummary calls than this")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("fleet_start: stopped by SIGTERM"))
    kcl = args.kcl or os.path.join(args.build_dir, "tools", "kcl", "kcl")
    if not os.access(kcl, os.X_OK):
        sys.exit(f"fleet_start: {kcl} not found; build it first "
                 f"(cmake --build {args.build_dir} --target kcl_cli)")
    total = args.streams * args.shards
    emu = proxy = None
    workers = []
    logs = tempfile.TemporaryDirectory(prefix="fleet-start-")
    try:
        emu, emu_urls = start_json_line(
            ["node", os.path.join(ROOT, "tools", "emulators", "serve.js"),
             "--shard-limit", str(max(200, total))], "serve.js")
        proxy, proxy_urls = start_json_line(
            ["node", os.path.join(ROOT, "tools", "scenario", "limits_proxy.js"),
             "--kinesis", emu_urls["kinesis"], "--dynamodb", emu_urls["dynamodb"]],
            "limits_proxy.js")
        suffix = "".join(random.choices(string.ascii_lowercase, k=6))
        names = [f"fleet-{suffix}-{i}" for i in range(args.streams)]
        app = f"fleet-{suffix}"
        create_streams(emu_urls["kinesis"], names, args.shards)
        env = dict(os.environ, AWS_REGION="us-east-1", AWS_ACCESS_KEY_ID="bench",
                   AWS_SECRET_ACCESS_KEY="bench-secret", KCL_LOG_LEVEL="info",
                   AWS_ENDPOINT_URL_KINESIS=proxy_urls["kinesis"],
                   AWS_ENDPOINT_URL_DYNAMODB=proxy_urls["dynamodb"])
        env.pop("AWS_PROFILE", None)
        cmd = [kcl, "consume", "--app", app, "--failover-ms", str(args.failover_ms)]
        for n in names:
            cmd += ["--stream", n]
        cmd += args.consume_arg
        ids = [f"w{i:03d}" for i in range(args.workers)]
        print(f"{args.workers} workers, {args.streams} streams x {args.shards} shards "
              f"({total} leases), through the limits proxy", flush=True)
        t0 = time.monotonic()
        for wid in ids:
            err = open(os.path.join(logs.name, wid + ".log"), "wb")
            workers.append(subprocess.Popen(cmd + ["--worker-id", wid], env=env,
                                            stdout=subprocess.DEVNULL, stderr=err))
            err.close()
        held_s = read_s = None
        live = set(ids)
        while time.monotonic() - t0 < args.timeout:
            dead = [w for w in workers if w.poll() is not None]
            if dead:
                # The logs' folder goes when the run ends: the first one's last lines are shown.
                first = ids[workers.index(dead[0])]
                with open(os.path.join(logs.name, first + ".log"), "rb") as f:
                    tail = f.read().decode(errors="replace").splitlines()[-20:]
                sys.exit(f"fleet_start: {len(dead)} worker(s) exited during the start "
                         f"(first: {first}, exit {dead[0].returncode}); its last lines:\n" +
                         "\n".join(tail))
            if held_s is None:
                owners = lease_owners(emu_urls["dynamodb"], app)
                if len(owners) >= total and all(o in live for o in owners.values()):
                    held_s = time.monotonic() - t0
            stats = proxy_stats(proxy_urls["stats"])
            read = stats.get("apis", {}).get("kinesis.GetRecords", {}).get("keys", {})
            if read_s is None and len([k for k in read if k != "?"]) >= total:
                read_s = time.monotonic() - t0
            if held_s is not None and read_s is not None:
                break
            time.sleep(0.25)
        stats = proxy_stats(proxy_urls["stats"])
        print(f"held: {'%.1f s' % held_s if held_s is not None else 'not within %g s' % args.timeout}"
              f" (every one of {total} leases owned by a live worker)")
        print(f"read: {'%.1f s' % read_s if read_s is not None else 'not within %g s' % args.timeout}"
              f" (a GetRecords call on every one of the {total} shards)")
        print(f"{'API':34} {'calls':>8} {'throttled':>9} {'peak/s':>7} {'peak/s a key':>12}")
        throttled_start_up = 0
        for api in sorted(stats.get("apis", {})):
            a = stats["apis"][api]
            print(f"{api:34} {a['calls']:8d} {a['throttled']:9d} {a['peakPerSecond']:7g} "
                  f"{a['peakPerKey']:12g}")
            if api in START_UP_APIS:
                throttled_start_up += a["throttled"]
        logged = 0
        for wid in ids:
            with open(os.path.join(logs.name, wid + ".log"), "rb") as f:
                logged += f.read().count(b"LimitExceeded")
        print(f"start-up throttles (control plane): {throttled_start_up}; "
              f"LimitExceeded in the workers' logs: {logged}")
        ok = (held_s is not None and held_s <= args.max_held_s and read_s is not None
              and read_s <= args.max_held_s and throttled_start_up == 0)
        describes = stats.get("apis", {}).get("kinesis.DescribeStreamSummary", {}).get("calls", 0)
        print(f"DescribeStreamSummary calls: {describes} ({args.streams} streams, "
              f"{args.workers} workers)")
        if args.check_describe_calls is not None and describes > args.check_describe_calls:
            print(f"more DescribeStreamSummary calls than {args.check_describe_calls}")
            ok = False
        print("fleet_start: " + ("ok" if ok else "FAILED"))
        return 0 if ok else 1
    finally:
        for w in workers:
            if w.poll() is None:
                w.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 60
        for w in workers:
            try:
                w.wait(timeout=max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                w.kill()
                w.wait()
        stop(proxy)
        stop(emu)
        logs.cleanup()


if __name__ == "__main__":
    sys.exit(main())
