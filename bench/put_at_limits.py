#!/usr/bin/env python3
"""`kcl put` at AWS's per-shard write limits: kinesalite behind the limits proxy.

Starts kinesalite (tools/emulators/serve.js) and the limits proxy
(tools/scenario/limits_proxy.js, AWS's figures: 1,000 records/s and 1 MiB/s per shard over a
sliding second, ProvisionedThroughputExceededException past them) on loopback, creates a
stream of --shards shards, writes an input of --records lines of --size bytes with random
partition keys (a JSON object per line, the key in field "k", read with `kcl put --key-field
k`), and runs `kcl put --file F` through the proxy. While it runs the proxy's counts
(GET /__limits/stats) are read every half second. Prints:

  records, seconds (kcl put's wall time), records/s over the whole run and sustained (from
  the proxy's counts between 10% and 90% of the records written), that rate as a fraction of
  the binding limit (the smaller of 1,000 records/s and 1 MiB/s over the record's bytes, per
  shard, times the shards), the records the proxy throttled and their fraction, kcl put's own
  count of records throttled and of retries (its summary line), and the highest per-shard
  rate the proxy saw in any one second (records and bytes).

--check-throttled F and --check-rate F make it a test: exit status 1 when more than F of the
records were throttled, or when the sustained rate is below F of the limit. Every server it
started is stopped, whatever happens.

  python3 bench/put_at_limits.py [--build-dir build/release | --kcl PATH] [--records 1000000]
                                 [--size 100] [--shards 4] [--kcl-arg=--linger-ms=50]...
                                 [--json] [--check-throttled 0.01] [--check-rate 0.9]
"""
import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECORDS_PER_SHARD = 1000
BYTES_PER_SHARD = 1 << 20
KEY_CHARS = 16  # the random partition key's length (hex digits)


def write_input(path, count, size, seed):
    """`count` lines of `size` bytes: {"k":"<16 random hex digits>","p":"<padding>"}."""
    rnd = random.Random(seed)
    overhead = len('{"k":"","p":""}') + KEY_CHARS
    if size < overhead:
        sys.exit(f"put_at_limits: --size must be at least {overhead} (the JSON around the key)")
    pad = "x" * (size - overhead)
    with open(path, "w") as f:
        for start in range(0, count, 10000):
            n = min(count, start + 10000) - start
            f.write("".join('{"k":"%016x","p":"%s"}\n' % (rnd.getrandbits(64), pad)
                            for _ in range(n)))


def start_json_child(cmd, what, env=None):
    """Starts a node script that prints one JSON line when ready; (process, parsed line)."""
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    line = p.stdout.readline()
    if not line:
        p.wait(timeout=10)
        raise RuntimeError(f"{what} exited ({p.returncode}) before printing its URLs")
    return p, json.loads(line)


def stop_child(p):
    if p is None or p.poll() is not None:
        return
    try:
        p.stdin.close()  # the emulators and the proxy exit when stdin closes
        p.wait(timeout=10)
    except Exception:
        p.kill()
        p.wait()


def cpu_seconds(p):
    """User + system CPU seconds of a running child (from /proc), or None."""
    try:
        with open(f"/proc/{p.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def get_json(url):
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


def put_keys(stats):
    """The proxy's PutRecords counts per shard key ("stream/shardId")."""
    api = stats.get("apis", {}).get("kinesis.PutRecords", {})
    return {k: v for k, v in api.get("keys", {}).items() if "/" in k}


def admitted_records(stats):
    return sum(v.get("records", {}).get("total", 0) for v in put_keys(stats).values())


class Sampler(threading.Thread):
    """Reads the proxy's counts every `period` seconds: (time, records admitted)."""

    def __init__(self, url, period=0.5):
        super().__init__(daemon=True)
        self.url, self.period = url, period
        self.samples = []
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            try:
                self.samples.append((time.monotonic(), admitted_records(get_json(self.url))))
            except Exception:
                pass
            self.stop.wait(self.period)


def sustained_rate(samples, total):
    """Records/s between the samples where 10% and 90% of `total` had been written."""
    lo = [s for s in samples if s[1] >= 0.1 * total]
    hi = [s for s in samples if s[1] <= 0.9 * total]
    if not lo or not hi:
        return None
    a, b = lo[0], hi[-1]
    if b[0] - a[0] < 1.0:
        return None
    return (b[1] - a[1]) / (b[0] - a[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build", "release"))
    ap.add_argument("--kcl", default=None, help="the kcl binary (default: BUILD_DIR/tools/kcl/kcl)")
    ap.add_argument("--records", type=int, default=1000000)
    ap.add_argument("--size", type=int, default=100,
                    help="bytes of each record's data (a line); the key adds 16")
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--kcl-arg", action="append", default=[],
                    help="an argument added to `kcl put` (repeat; e.g. --kcl-arg=--linger-ms=50); "
                         "not --aggregate: the proxy counts Kinesis records, and the rate is "
                         "judged against the per-shard record limit")
    ap.add_argument("--json", action="store_true", help="also print the figures as one JSON line")
    ap.add_argument("--check-throttled", type=float, default=None,
                    help="fail when more than this fraction of the records was throttled")
    ap.add_argument("--check-rate", type=float, default=None,
                    help="fail when the sustained rate is below this fraction of the limit")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds kcl put may take")
    args = ap.parse_args()
    if any(a.startswith("--aggregate") for a in args.kcl_arg):
        sys.exit("put_at_limits: --aggregate is not measured here (the proxy counts aggregates, "
                 "not user records, and an aggregated put is bound by bytes per shard)")
    if args.records < 1 or args.shards < 1:
        sys.exit("put_at_limits: --records and --shards must be at least 1")
    kcl = args.kcl or os.path.join(args.build_dir, "tools", "kcl", "kcl")
    if not os.access(kcl, os.X_OK):
        sys.exit(f"put_at_limits: {kcl} not found; build it (cmake --build {args.build_dir} "
                 "--target kcl_cli)")

    work = tempfile.mkdtemp(prefix="put_at_limits-")
    input_path = os.path.join(work, "input.jsonl")
    write_input(input_path, args.records, args.size, args.seed)
    emu = proxy = None
    status = 0
    try:
        emu, urls = start_json_child(["node", os.path.join(ROOT, "tools", "emulators", "serve.js"),
                                      "--kinesis"], "the emulator (serve.js)")
        proxy, front = start_json_child(["node", os.path.join(ROOT, "tools", "scenario",
                                                              "limits_proxy.js"),
                                         "--kinesis", urls["kinesis"]], "the limits proxy")
        env = dict(os.environ)
        env.update({"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "bench",
                    "AWS_SECRET_ACCESS_KEY": "bench-secret"})
        env.pop("AWS_PROFILE", None)
        stream = "put-limits-" + "".join(random.choices("abcdefghijklmnopqrstuvwxyz", k=8))
        # The stream is made on the emulator itself (control traffic, not under test).
        subprocess.run([kcl, "create-stream", "--stream", stream, "--shards", str(args.shards)],
                       env=dict(env, AWS_ENDPOINT_URL_KINESIS=urls["kinesis"]), check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        sampler = Sampler(front["stats"])
        sampler.start()
        cmd = [kcl, "put", "--stream", stream, "--file", input_path, "--key-field", "k"] + \
            args.kcl_arg
        emu_cpu0, proxy_cpu0 = cpu_seconds(emu), cpu_seconds(proxy)
        started = time.monotonic()
        run = subprocess.run(cmd, env=dict(env, AWS_ENDPOINT_URL_KINESIS=front["kinesis"]),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             timeout=args.timeout)
        seconds = time.monotonic() - started
        emu_cpu = (cpu_seconds(emu) or 0) - (emu_cpu0 or 0)
        proxy_cpu = (cpu_seconds(proxy) or 0) - (proxy_cpu0 or 0)
        sampler.stop.set()
        sampler.join()
        stats = get_json(front["stats"])
        if run.returncode != 0:
            sys.stderr.write(run.stderr[-4000:])
            print(f"put_at_limits: kcl put exited {run.returncode}", file=sys.stderr)
            status = 1

        keys = put_keys(stats)
        admitted = admitted_records(stats)
        throttled = sum(v.get("throttledRecords", {}).get("total", 0) for v in keys.values())
        peak_records = max((v.get("records", {}).get("peakPerSecond", 0) for v in keys.values()),
                           default=0)
        peak_bytes = max((v.get("bytes", {}).get("peakPerSecond", 0) for v in keys.values()),
                         default=0)
        record_bytes = args.size + KEY_CHARS
        per_shard = min(RECORDS_PER_SHARD, BYTES_PER_SHARD / record_bytes)
        binding = "records" if RECORDS_PER_SHARD <= BYTES_PER_SHARD / record_bytes else "bytes"
        limit = per_shard * args.shards
        sustained = sustained_rate(sampler.samples, args.records)
        summary = run.stderr.strip().splitlines()[-1] if run.stderr.strip() else ""
        m = re.search(r"(\d+) retries", summary)
        retries = int(m.group(1)) if m else None
        m = re.search(r"(\d+) throttled", summary)
        kcl_throttled = int(m.group(1)) if m else None

        print(f"kcl put: {args.records} records of {args.size} B (+{KEY_CHARS} B key) into "
              f"{args.shards} shards through the limits proxy; binding limit: {binding} "
              f"({limit:.0f} records/s)")
        print(f"  seconds              {seconds:.2f}")
        print(f"  records/s, whole run {args.records / seconds:.0f} "
              f"({args.records / seconds / limit:.3f} of the limit)")
        if sustained is not None:
            print(f"  records/s, sustained {sustained:.0f} ({sustained / limit:.3f} of the limit; "
                  "10%-90% of the records)")
        else:
            print("  records/s, sustained - (the run was too short to measure)")
        print(f"  written (proxy)      {admitted}")
        print(f"  throttled (proxy)    {throttled} records ({throttled / args.records:.4f} of the "
              "records)")
        print(f"  kcl put's summary    {summary}")
        print(f"  peak per shard       {peak_records:.0f} records/s, {peak_bytes:.0f} B/s "
              f"(limits {RECORDS_PER_SHARD} and {BYTES_PER_SHARD})")
        print(f"  servers' CPU         kinesalite {emu_cpu:.1f} s ({emu_cpu / seconds:.0%} of the "
              f"run), limits proxy {proxy_cpu:.1f} s ({proxy_cpu / seconds:.0%})")
        figures = {"records": args.records, "size": args.size, "shards": args.shards,
                   "seconds": round(seconds, 3), "rate": round(args.records / seconds, 1),
                   "sustained_rate": round(sustained, 1) if sustained is not None else None,
                   "limit": round(limit, 1), "binding": binding,
                   "fraction": round(args.records / seconds / limit, 4),
                   "sustained_fraction": round(sustained / limit, 4) if sustained else None,
                   "written": admitted, "throttled": throttled,
                   "throttled_fraction": round(throttled / args.records, 6),
                   "kcl_retries": retries, "kcl_throttled": kcl_throttled,
                   "peak_records_per_shard": peak_records, "peak_bytes_per_shard": peak_bytes,
                   "kinesalite_cpu_s": round(emu_cpu, 2), "proxy_cpu_s": round(proxy_cpu, 2),
                   "kcl_args": args.kcl_arg}
        if args.json:
            print(json.dumps(figures))
        if admitted != args.records and run.returncode == 0:
            print(f"put_at_limits: the proxy counted {admitted} records written, not "
                  f"{args.records}", file=sys.stderr)
            status = 1
        if args.check_throttled is not None and throttled > args.check_throttled * args.records:
            print(f"put_at_limits: FAIL: {throttled} records throttled, more than "
                  f"{args.check_throttled} of {args.records}", file=sys.stderr)
            status = 1
        if args.check_rate is not None:
            rate = sustained if sustained is not None else args.records / seconds
            if rate < args.check_rate * limit:
                print(f"put_at_limits: FAIL: {rate:.0f} records/s, below {args.check_rate} of "
                      f"{limit:.0f}", file=sys.stderr)
                status = 1
    finally:
        stop_child(proxy)
        stop_child(emu)
        for f in os.listdir(work):
            os.unlink(os.path.join(work, f))
        os.rmdir(work)
    if status == 0 and (args.check_throttled is not None or args.check_rate is not None):
        print("put_at_limits: PASS")
    return status


if __name__ == "__main__":
    sys.exit(main())
