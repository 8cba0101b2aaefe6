#!/usr/bin/env python3
"""Multi-stream scale: one kcl consume worker holding --leases leases, as one stream of that
many shards (the baseline, in the same run) and as --streams streams sharing them.

Starts kinesalite (with room for the shards) and dynalite on loopback, creates both layouts,
puts --records-per-lease records per lease on average with `kcl put`, then runs
`kcl consume --from trim-horizon --max N` on each layout in turn (a fresh application each
time, so it creates every lease and reads every shard) and prints, per layout, the wall time
until it printed every record, its CPU time (user + system, from wait4), peak RSS and the
most threads it ran at once, CPU and RSS also per lease, with the multi-stream run's ratio to
the one-stream run.

  python3 bench/multi_stream_scale.py [--build-dir build/release] [--leases 1000]
                                      [--streams 50] [--records-per-lease 5] [--repeat 1]
"""
import argparse
import json
import os
import random
import string
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from consume_e2e import ROOT, run_measured  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build", "release"))
    ap.add_argument("--leases", type=int, default=1000)
    ap.add_argument("--streams", type=int, default=50)
    ap.add_argument("--records-per-lease", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    if args.leases % args.streams:
        sys.exit("multi_stream_scale: --leases must be a multiple of --streams")
    kcl = os.path.join(args.build_dir, "tools", "kcl", "kcl")
    if not os.access(kcl, os.X_OK):
        sys.exit(f"multi_stream_scale: {kcl} not found; build first")
    emu = subprocess.Popen(["node", os.path.join(ROOT, "tools", "emulators", "serve.js"),
                            "--shard-limit", str(2 * args.leases + 10)],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        urls = json.loads(emu.stdout.readline())
        env = dict(os.environ)
        env.update({"AWS_ENDPOINT_URL_KINESIS": urls["kinesis"],
                    "AWS_ENDPOINT_URL_DYNAMODB": urls["dynamodb"], "AWS_REGION": "us-east-1",
                    "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench-secret"})
        env.pop("AWS_PROFILE", None)
        suffix = "".join(random.choices(string.ascii_lowercase, k=6))
        per_stream = args.leases // args.streams

        def load(stream, shards, records):
            subprocess.run([kcl, "create-stream", "--stream", stream, "--shards", str(shards)],
                           env=env, check=True, stdout=subprocess.DEVNULL)
            lines = "".join(f"{stream}-{i:07d} payload\n" for i in range(records))
            subprocess.run([kcl, "put", "--stream", stream, "--quiet"], env=env, check=True,
                           input=lines.encode(), stdout=subprocess.DEVNULL)

        total = args.leases * args.records_per_lease
        one = f"scale1-{suffix}"
        t0 = time.monotonic()
        load(one, args.leases, total)
        many = [f"scale{args.streams}-{suffix}-{i:03d}" for i in range(args.streams)]
        for s in many:
            load(s, per_stream, total // args.streams)
        print(f"loaded {total} records into 1 stream of {args.leases} shards and into "
              f"{args.streams} streams of {per_stream} in {time.monotonic() - t0:.0f} s",
              flush=True)
        streams_file = tempfile.NamedTemporaryFile("w", suffix=".streams", delete=False)
        streams_file.write("".join(s + "\n" for s in many))
        streams_file.close()

        layouts = [("one stream", ["--stream", one]),
                   (f"{args.streams} streams", ["--streams-file", streams_file.name])]
        results = {}
        for rep in range(args.repeat):
            for name, flags in layouts:
                app = f"scale-{suffix}-{rep}-{len(results)}-{name.split()[0]}"
                cmd = [kcl, "consume", *flags, "--app", app, "--from", "trim-horizon", "--max",
                       str(total), "--threads", "4"]
                r = run_measured(cmd, env, emu.pid)
                results.setdefault(name, []).append(r)
                print(f"{name:12s} {args.leases} leases  wall {r['wall_s']:6.1f} s  cpu "
                      f"{r['cpu_s']:6.2f} s ({r['cpu_s'] * 1e3 / args.leases:.2f} ms/lease)  "
                      f"rss {r['rss_mb']:6.1f} MB ({r['rss_mb'] * 1024 / args.leases:.1f} "
                      f"KB/lease)  threads {r['threads_max']}  emulator cpu "
                      f"{r['emulator_cpu_s']:6.1f} s", flush=True)
        medians = {n: sorted(rs, key=lambda r: r["cpu_s"])[len(rs) // 2]
                   for n, rs in results.items()}
        base, multi = medians["one stream"], medians[f"{args.streams} streams"]
        print(f"{args.streams} streams / one stream: cpu {multi['cpu_s'] / base['cpu_s']:.2f}x, "
              f"rss {multi['rss_mb'] / base['rss_mb']:.2f}x, wall "
              f"{multi['wall_s'] / base['wall_s']:.2f}x")
        print(json.dumps({"leases": args.leases, "streams": args.streams, "records": total,
                          "results": medians}))
        os.unlink(streams_file.name)
    finally:
        emu.stdin.close()
        emu.terminate()
        emu.wait(timeout=10)


if __name__ == "__main__":
    main()
