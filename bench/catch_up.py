#!/usr/bin/env python3
"""Catch-up at the shard's limits: how fast `kcl consume` reads a one-shard backlog through
the AWS-limits proxy, and how many of its GetRecords calls the proxy throttles.

Starts kinesalite and dynalite (tools/emulators/serve.js) and the limits proxy
(tools/scenario/limits_proxy.js, AWS's figures: per shard 5 GetRecords calls/s and 2 MiB/s,
a 10 MiB answer followed by throttling for the rest of ~5 s) on loopback, creates a stream of
one shard, loads --mib MiB of --record-size-byte records straight into kinesalite (PutRecords
of 500 records, --loaders in parallel: the proxy's write limit of 1 MiB/s would make the
loading slower than the reading), then runs

    kcl consume --stream S --app A --from trim-horizon --max N > /dev/null

through the proxy (Kinesis and DynamoDB) until it has printed every record. It polls the
proxy's counts (GET /__limits/stats) every 50 ms while the consumer runs and prints:
  - MiB read (data + partition keys, as the proxy counts them against the 2 MiB/s),
  - the whole run: seconds from the consumer's start to its exit (worker start, lease table,
    shutdown included), MiB/s and its fraction of 2 MiB/s,
  - the read phase: from the first GetRecords call to the last answer (the consumer's start
    and stop left out), MiB/s and its fraction of 2 MiB/s (each answer is paid for before the
    next call, the last one's time is not waited: the backlog's tail is a small answer),
  - GetRecords calls, throttled calls, and the throttled fraction.
The last line is the same as JSON. Every server it started is stopped, whatever happens.

--check-max-throttled F and --check-min-read-fraction F make it a test: exit 1 (after the
figures) when the throttled fraction is above F, or the read phase's fraction of 2 MiB/s
below F.

--fan-out reads the backlog with enhanced fan-out instead: bench/fanout_server.js serves a
stream of one shard holding the backlog (records of --record-size bytes, pushed in
SubscribeToShard events at 2 MiB/s a subscription, as AWS does for each consumer and shard;
kinesalite has no SubscribeToShard and the limits proxy does not model it), DynamoDB is
dynalite, and `kcl consume --fan-out` reads it. The read phase is then its first record
printed to its last (bytes: record data, no keys); there are no GetRecords calls.

  python3 bench/catch_up.py [--build-dir build/release] [--mib 200] [--record-size 1024]
                            [--loaders 4] [--consume-arg ARG]... [--timeout S]
                            [--check-max-throttled F] [--check-min-read-fraction F]
                            [--fan-out]
"""
import argparse
import base64
import ctypes
import http.client
import json
import os
import random
import signal
import string
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MiB = 1024 * 1024
SHARD_READ_LIMIT = 2 * MiB  # GetRecords bytes per second per shard (AWS's, the proxy's)


def die_with_parent():
    """In a child before exec: SIGTERM when this script dies, even by SIGKILL (Linux's
    PR_SET_PDEATHSIG), so no server outlives a run that was killed."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def start_json_line(cmd, what):
    """Starts a server that prints one JSON line once it listens (and dies with this script);
    returns (process, parsed line)."""
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         preexec_fn=die_with_parent)
    line = p.stdout.readline()
    try:
        return p, json.loads(line)
    except ValueError:
        stop(p)
        sys.exit(f"catch_up: {what} did not start (it printed {line!r})")


def stop(p):
    if p is None or p.poll() is not None:
        return
    try:
        p.stdin.close()
    except (OSError, AttributeError, ValueError):
        pass
    p.terminate()
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def aws_call(url, target, body, timeout=60):
    """One unsigned JSON call (the emulators only check that an Authorization header of the
    right shape is there); returns the parsed answer or raises with the error."""
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    try:
        payload = json.dumps(body).encode()
        conn.request("POST", "/", payload, aws_headers(target))
        r = conn.getresponse()
        text = r.read()
        if r.status != 200:
            raise RuntimeError(f"{target} answered HTTP {r.status}: {text[:300]!r}")
        return json.loads(text) if text else {}
    finally:
        conn.close()


def aws_headers(target):
    return {
        "Content-Type": "application/x-amz-json-1.1",
        "X-Amz-Target": target,
        "X-Amz-Date": time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()),
        "Authorization": "AWS4-HMAC-SHA256 Credential=AKIDBENCH/20240101/us-east-1/kinesis/"
                         "aws4_request, SignedHeaders=host;x-amz-date, Signature=0000",
    }


def load_backlog(kinesis_url, stream, count, size, loaders):
    """Puts `count` records of `size` bytes into the stream, PutRecords of 500 records from
    `loaders` threads at once, straight into kinesalite. Returns the bytes written (data +
    partition keys)."""
    rnd = random.Random(1)
    alphabet = string.ascii_letters + string.digits
    # A few distinct bodies (each record starts with its number, so no two are the same).
    bodies = ["".join(rnd.choices(alphabet, k=size)) for _ in range(16)]
    batches = [(start, min(count, start + 500)) for start in range(0, count, 500)]
    written = [0] * loaders
    errors = []
    next_batch = [0]
    lock = threading.Lock()
    u = urllib.parse.urlparse(kinesis_url)

    def loader(me):
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
        try:
            while True:
                with lock:
                    if errors or next_batch[0] >= len(batches):
                        return
                    lo, hi = batches[next_batch[0]]
                    next_batch[0] += 1
                records = []
                for i in range(lo, hi):
                    tag = f"{i:09d}"
                    data = (tag + bodies[i % len(bodies)][len(tag):]).encode()
                    key = f"k{i % 1000}"
                    records.append({"Data": base64.b64encode(data).decode(), "PartitionKey": key})
                    written[me] += len(data) + len(key)
                pending = records
                for attempt in range(20):
                    conn.request("POST", "/", json.dumps({"StreamName": stream,
                                                          "Records": pending}).encode(),
                                 aws_headers("Kinesis_20131202.PutRecords"))
                    r = conn.getresponse()
                    answer = json.loads(r.read() or b"{}")
                    if r.status != 200:
                        raise RuntimeError(f"PutRecords answered HTTP {r.status}: {answer}")
                    if not answer.get("FailedRecordCount"):
                        break
                    pending = [rec for rec, res in zip(pending, answer["Records"])
                               if "ErrorCode" in res]
                    time.sleep(0.05 * (attempt + 1))
                else:
                    raise RuntimeError(f"PutRecords: {len(pending)} records still failing")
        except Exception as e:  # reported by the main thread
            with lock:
                errors.append(f"loader {me}: {e}")
        finally:
            conn.close()

    threads = [threading.Thread(target=loader, args=(n,)) for n in range(loaders)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError("; ".join(errors))
    return sum(written)


def proxy_stats(stats_url):
    with urllib.request.urlopen(stats_url, timeout=10) as r:
        return json.loads(r.read())


def shard_reads(stats, key):
    """(calls, throttled, bytes) of GetRecords on the shard key in the proxy's counts."""
    k = stats.get("apis", {}).get("kinesis.GetRecords", {}).get("keys", {}).get(key, {})
    return k.get("calls", 0), k.get("throttled", 0), k.get("bytes", {}).get("total", 0)


def run_fan_out(args, kcl, count):
    """The backlog read with `kcl consume --fan-out` from bench/fanout_server.js (see the
    module's text)."""
    server = dynamo = consumer = None
    try:
        suffix = "".join(random.choices(string.ascii_lowercase, k=8))
        stream = "catchup-fanout-" + suffix
        server, port = start_json_line(
            ["node", os.path.join(ROOT, "bench", "fanout_server.js"), "--stream",
             f"{stream}={count}", "--shards", "1", "--record-bytes", str(args.record_size)],
            "fanout_server.js")
        dynamo, dynamo_urls = start_json_line(
            ["node", os.path.join(ROOT, "tools", "emulators", "serve.js"), "--dynamodb"],
            "serve.js --dynamodb")
        env = dict(os.environ, AWS_REGION="us-east-1", AWS_ACCESS_KEY_ID="bench",
                   AWS_SECRET_ACCESS_KEY="bench-secret",
                   AWS_ENDPOINT_URL_KINESIS=f"http://127.0.0.1:{port['port']}",
                   AWS_ENDPOINT_URL_DYNAMODB=dynamo_urls["dynamodb"])
        env.pop("AWS_PROFILE", None)
        cmd = [kcl, "consume", "--stream", stream, "--app", "catchup-fanout-app-" + suffix,
               "--from", "trim-horizon", "--max", str(count), "--fan-out", "--consumer-name",
               "catchup-fanout"] + args.consume_arg
        start = time.monotonic()
        consumer = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, preexec_fn=die_with_parent)
        errs = []
        err_reader = threading.Thread(target=lambda: errs.append(consumer.stderr.read()),
                                      daemon=True)
        err_reader.start()
        timer = threading.Timer(args.timeout, consumer.kill)
        timer.start()
        first = last = None
        lines = 0
        for _ in consumer.stdout:
            last = time.monotonic()
            if first is None:
                first = last
            lines += 1
        consumer.wait()
        timer.cancel()
        wall = time.monotonic() - start
        err_reader.join()
        if consumer.returncode != 0 or lines != count:
            tail = (errs[0] if errs else b"").decode(errors="replace")[-4000:]
            sys.exit(f"catch_up: {' '.join(cmd)} exited {consumer.returncode} after {lines} of "
                     f"{count} records:\n{tail}")
        read = count * args.record_size
        limit_mib = SHARD_READ_LIMIT / MiB
        run_rate = read / MiB / wall
        phase_s = last - first
        phase_rate = read / MiB / phase_s if phase_s > 0 else 0.0
        print(f"fan-out: read {read / MiB:.1f} MiB ({count} records) in {wall:.1f} s: "
              f"{run_rate:.2f} MiB/s = {run_rate / limit_mib:.1%} of {limit_mib:g} MiB/s "
              f"(the whole run)")
        print(f"read phase (first record printed to last): {phase_s:.1f} s: {phase_rate:.2f} "
              f"MiB/s = {phase_rate / limit_mib:.1%} of {limit_mib:g} MiB/s (the server pushes "
              f"at most {limit_mib:g} MiB/s a subscription)")
        print(json.dumps({"fan_out": True, "mib": round(read / MiB, 3), "records": count,
                          "record_size": args.record_size, "seconds": round(wall, 2),
                          "mib_per_s": round(run_rate, 3),
                          "fraction_of_limit": round(run_rate / limit_mib, 4),
                          "read_phase_s": round(phase_s, 2),
                          "read_phase_mib_per_s": round(phase_rate, 3),
                          "read_phase_fraction_of_limit": round(phase_rate / limit_mib, 4)}),
              flush=True)
        if (args.check_min_read_fraction is not None and
                phase_rate / limit_mib < args.check_min_read_fraction):
            sys.exit(f"catch_up: FAIL: the read phase ran at {phase_rate / limit_mib:.1%} of "
                     f"{limit_mib:g} MiB/s (at least {args.check_min_read_fraction:.0%} wanted)")
    finally:
        if consumer is not None and consumer.poll() is None:
            consumer.kill()
            consumer.wait()
        stop(dynamo)
        stop(server)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build", "release"))
    ap.add_argument("--kcl", default="", help="the kcl binary (default: BUILD_DIR/tools/kcl/kcl)")
    ap.add_argument("--mib", type=float, default=200, help="backlog size in MiB of record data")
    ap.add_argument("--record-size", type=int, default=1024, help="bytes of data per record")
    ap.add_argument("--loaders", type=int, default=4, help="PutRecords calls in flight at once")
    ap.add_argument("--consume-arg", action="append", default=[],
                    help="one more argument for kcl consume (repeat for several)")
    ap.add_argument("--timeout", type=float, default=1800,
                    help="seconds the consumer may take before it is stopped and the run fails")
    ap.add_argument("--check-max-throttled", type=float, default=None,
                    help="fail when more than this fraction of GetRecords calls was throttled")
    ap.add_argument("--check-min-read-fraction", type=float, default=None,
                    help="fail when the read phase ran below this fraction of 2 MiB/s")
    ap.add_argument("--fan-out", action="store_true",
                    help="read with enhanced fan-out from bench/fanout_server.js instead")
    args = ap.parse_args()
    # SIGTERM (a test's timeout) ends the run through its finally blocks: every server stops.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("catch_up: stopped by SIGTERM"))
    kcl = args.kcl or os.path.join(args.build_dir, "tools", "kcl", "kcl")
    if not os.access(kcl, os.X_OK):
        sys.exit(f"catch_up: {kcl} not found; build it first "
                 f"(cmake --build {args.build_dir} --target kcl_cli)")
    if args.record_size < 16:
        sys.exit("catch_up: --record-size must be at least 16 bytes")
    count = max(1, int(args.mib * MiB) // args.record_size)
    if args.fan_out:
        return run_fan_out(args, kcl, count)

    emu = proxy = consumer = None
    err_file = tempfile.TemporaryFile()
    try:
        emu, emu_urls = start_json_line(
            ["node", os.path.join(ROOT, "tools", "emulators", "serve.js")], "serve.js")
        proxy, proxy_urls = start_json_line(
            ["node", os.path.join(ROOT, "tools", "scenario", "limits_proxy.js"),
             "--kinesis", emu_urls["kinesis"], "--dynamodb", emu_urls["dynamodb"]],
            "limits_proxy.js")
        env = dict(os.environ, AWS_REGION="us-east-1", AWS_ACCESS_KEY_ID="bench",
                   AWS_SECRET_ACCESS_KEY="bench-secret")
        env.pop("AWS_PROFILE", None)
        limited = dict(env, AWS_ENDPOINT_URL_KINESIS=proxy_urls["kinesis"],
                       AWS_ENDPOINT_URL_DYNAMODB=proxy_urls["dynamodb"])

        suffix = "".join(random.choices(string.ascii_lowercase, k=8))
        stream = "catchup-" + suffix
        aws_call(emu_urls["kinesis"], "Kinesis_20131202.CreateStream",
                 {"StreamName": stream, "ShardCount": 1})
        for _ in range(200):
            summary = aws_call(emu_urls["kinesis"], "Kinesis_20131202.DescribeStreamSummary",
                               {"StreamName": stream})["StreamDescriptionSummary"]
            if summary["StreamStatus"] == "ACTIVE":
                break
            time.sleep(0.05)
        else:
            sys.exit(f"catch_up: stream {stream} did not become ACTIVE")
        t0 = time.monotonic()
        loaded = load_backlog(emu_urls["kinesis"], stream, count, args.record_size, args.loaders)
        load_s = time.monotonic() - t0
        print(f"loaded {count} records of {args.record_size} B ({loaded / MiB:.1f} MiB with keys) "
              f"into 1 shard in {load_s:.1f} s ({loaded / MiB / load_s:.1f} MiB/s, straight into "
              f"kinesalite)", flush=True)

        shard_key = f"{stream}/shardId-000000000000"
        cmd = [kcl, "consume", "--stream", stream, "--app", "catchup-app-" + suffix, "--from",
               "trim-horizon", "--max", str(count)] + args.consume_arg
        start = time.monotonic()
        consumer = subprocess.Popen(cmd, env=limited, stdout=subprocess.DEVNULL, stderr=err_file,
                                    preexec_fn=die_with_parent)
        first_call = None   # the first poll that saw a GetRecords call
        last_answer = None  # the first poll that saw every byte read
        seen_bytes = 0
        while True:
            done = consumer.poll() is not None
            now = time.monotonic()
            made, _, got = shard_reads(proxy_stats(proxy_urls["stats"]), shard_key)
            if made > 0 and first_call is None:
                first_call = now
            if got > seen_bytes:
                seen_bytes = got
                last_answer = now
            if done:
                break
            if now - start > args.timeout:
                consumer.kill()
                consumer.wait()
                sys.exit(f"catch_up: kcl consume did not read {count} records in "
                         f"{args.timeout:.0f} s (read {seen_bytes / MiB:.1f} MiB)")
            time.sleep(0.05)
        wall = time.monotonic() - start
        if consumer.returncode != 0:
            err_file.seek(0)
            tail = err_file.read().decode(errors="replace")[-4000:]
            sys.exit(f"catch_up: {' '.join(cmd)} exited {consumer.returncode}:\n{tail}")

        calls, throttled, read = shard_reads(proxy_stats(proxy_urls["stats"]), shard_key)
        throttled_fraction = throttled / calls if calls else 0.0
        run_rate = read / MiB / wall
        phase_s = (last_answer - first_call) if first_call and last_answer else 0.0
        phase_rate = read / MiB / phase_s if phase_s > 0 else 0.0
        limit_mib = SHARD_READ_LIMIT / MiB
        print(f"read {read / MiB:.1f} MiB ({count} records) in {wall:.1f} s: {run_rate:.2f} MiB/s "
              f"= {run_rate / limit_mib:.1%} of {limit_mib:g} MiB/s (the whole run)")
        print(f"read phase (first GetRecords call to last answer): {phase_s:.1f} s: "
              f"{phase_rate:.2f} MiB/s = {phase_rate / limit_mib:.1%} of {limit_mib:g} MiB/s")
        print(f"GetRecords: {calls} calls, {throttled} throttled = {throttled_fraction:.2%}")
        result = {"mib": round(read / MiB, 3), "records": count, "record_size": args.record_size,
                  "load_s": round(load_s, 2), "seconds": round(wall, 2),
                  "mib_per_s": round(run_rate, 3), "fraction_of_limit": round(run_rate / limit_mib, 4),
                  "read_phase_s": round(phase_s, 2), "read_phase_mib_per_s": round(phase_rate, 3),
                  "read_phase_fraction_of_limit": round(phase_rate / limit_mib, 4),
                  "get_records_calls": calls, "throttled": throttled,
                  "throttled_fraction": round(throttled_fraction, 4)}
        print(json.dumps(result), flush=True)

        failures = []
        if args.check_max_throttled is not None and throttled_fraction > args.check_max_throttled:
            failures.append(f"{throttled_fraction:.2%} of GetRecords calls were throttled "
                            f"(at most {args.check_max_throttled:.2%} allowed)")
        if (args.check_min_read_fraction is not None and
                phase_rate / limit_mib < args.check_min_read_fraction):
            failures.append(f"the read phase ran at {phase_rate / limit_mib:.1%} of "
                            f"{limit_mib:g} MiB/s (at least {args.check_min_read_fraction:.0%} "
                            f"wanted)")
        if failures:
            sys.exit("catch_up: FAIL: " + "; ".join(failures))
    finally:
        if consumer is not None and consumer.poll() is None:
            consumer.kill()
            consumer.wait()
        stop(proxy)
        stop(emu)
        err_file.close()


if __name__ == "__main__":
    main()
