#!/usr/bin/env python3
"""End-to-end producer benchmark: CPU per record and peak RSS of `kcl put` against kinesalite,
beside a Node loop over the AWS SDK for JavaScript v3 measured in the same run.

Starts kinesalite on loopback (tools/emulators/serve.js), writes an input file of --records
lines of --size bytes, and puts it into a fresh stream of --shards shards with, in turn:
  plain       `kcl put --file F --quiet`: one Kinesis record per line (default linger and
              per-shard limits, ordered mode)
  aggregated  the same with --aggregate (KPL aggregates)
  js          bench/producer_peer.js: PutRecords of 500 records, 4 calls in flight, through
              @aws-sdk/client-kinesis (the peer, the run's baseline)
  client      the floor under the producer (bench_put_records_floor client): calls of 500
              lines through kcl-cpp's Kinesis client alone (JSON body, SigV4, libcurl, the
              answer parsed), one at a time at kcl put's pace (a call every 125 ms for 4
              shards); the CPU of its sending thread only
  curl        the same bodies, built beforehand, posted by libcurl alone (no signing, no
              parsing): what moving the bytes costs here
Each one's CPU time (user + system) comes from wait4() on its process, so kinesalite's CPU is
not counted (it is printed for scale); its peak RSS is its VmHWM, polled while it runs. The
table gives each one's CPU per record and the peer's CPU per record divided by it (how many
times leaner than the peer). --repeat N keeps each one's median. --large N also puts an input
of N records with `kcl put` (plain and aggregated) to show that RSS does not grow with the
input (kcl put streams it).

--server kinesis-local puts into kinesis-local instead (it listens on every interface: run
the script in a network namespace of its own, `unshare -n`); --wire W passes `--wire W` to
every `kcl put` (the peer speaks JSON whatever the wire).

  python3 bench/producer_e2e.py [--build-dir build/release] [--records 100000] [--shards 4]
                                [--size 100] [--only plain,aggregated,js] [--repeat N]
                                [--large N] [--wrap CMD] [--server kinesalite|kinesis-local]
                                [--wire auto|cbor|json]
  unshare -n python3 bench/producer_e2e.py --server kinesis-local --wire cbor \
                                --only plain,aggregated,js --records 20000 --repeat 3
"""
import argparse
import json
import os
import random
import string
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from consume_e2e import ROOT, run_measured, start_kinesis_local  # noqa: E402


def write_input(path, count, size):
    """`count` lines of `size` bytes each (a 7-digit number, a space, random letters)."""
    rnd = random.Random(1)
    body = "".join(rnd.choices(string.ascii_letters + string.digits, k=max(0, size - 8)))
    with open(path, "w") as f:
        for start in range(0, count, 10000):
            f.write("".join(f"{i:07d} {body}\n" for i in range(start, min(count, start + 10000))))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build", "release"))
    ap.add_argument("--records", type=int, default=100000)
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--only", default="plain,aggregated,js,client,curl")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--large", type=int, default=0,
                    help="also put an input of this many records with kcl put (RSS check)")
    ap.add_argument("--wrap", default="",
                    help="a command put before each run, e.g. 'perf record -g -o P-{name}.data "
                         "--' ({name} becomes the run's name and repetition; its CPU is then "
                         "counted too: for profiles, not for figures)")
    ap.add_argument("--server", choices=("kinesalite", "kinesis-local"), default="kinesalite",
                    help="kinesalite (tools/emulators/serve.js) or kinesis-local (in a network "
                         "namespace: unshare -n)")
    ap.add_argument("--wire", choices=("auto", "cbor", "json"), default="",
                    help="the --wire of every kcl put (default: kcl's, auto)")
    args = ap.parse_args()
    kcl = os.path.join(args.build_dir, "tools", "kcl", "kcl")
    kcl_put = [kcl, "--wire", args.wire, "put"] if args.wire else [kcl, "put"]
    peer = os.path.join(ROOT, "bench", "producer_peer.js")
    floor = os.path.join(args.build_dir, "bench", "bench_put_records_floor")
    if not os.access(kcl, os.X_OK):
        sys.exit(f"producer_e2e: {kcl} not found; build first (cmake --build {args.build_dir})")
    if {"client", "curl"} & set(args.only.split(",")) and not os.access(floor, os.X_OK):
        sys.exit(f"producer_e2e: {floor} not found; build it (cmake --build {args.build_dir} "
                 "--target bench_put_records_floor) or leave client,curl out of --only")
    if not os.path.isdir(os.path.join(ROOT, "node_modules", "@aws-sdk", "client-kinesis")):
        sys.exit("producer_e2e: node_modules/@aws-sdk/client-kinesis is missing; run "
                 "scripts/install-deps.sh")

    work = tempfile.mkdtemp(prefix="producer_e2e-")
    inputs = {args.records: os.path.join(work, "input.txt")}
    write_input(inputs[args.records], args.records, args.size)
    if args.large:
        inputs[args.large] = os.path.join(work, "large.txt")
        write_input(inputs[args.large], args.large, args.size)

    if args.server == "kinesis-local":
        emu, others, urls = start_kinesis_local()
    else:
        # Every run writes to a stream of its own: kinesalite's shard limit is raised to hold
        # them all (its default, 200, stopped a --repeat 10 run partway).
        runs_planned = len(args.only.split(",")) * (args.repeat + (1 if args.large else 0))
        shard_limit = max(200, runs_planned * args.shards + 10)
        emu = subprocess.Popen(["node", os.path.join(ROOT, "tools", "emulators", "serve.js"),
                                "--kinesis", "--shard-limit", str(shard_limit)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        others, urls = [], None
    try:
        urls = urls or json.loads(emu.stdout.readline())
        env = dict(os.environ)
        env.update({
            "AWS_ENDPOINT_URL_KINESIS": urls["kinesis"],
            "AWS_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench-secret",
        })
        env.pop("AWS_PROFILE", None)
        suffix = "".join(random.choices(string.ascii_lowercase, k=8))
        streams = iter(range(1000000))

        def fresh_stream():
            name = f"bench-put-{suffix}-{next(streams)}"
            subprocess.run([kcl, "create-stream", "--stream", name, "--shards",
                            str(args.shards)], env=env, check=True, stdout=subprocess.DEVNULL)
            return name

        def command(name, stream, path):
            if name == "plain":
                return kcl_put + ["--stream", stream, "--file", path, "--quiet"]
            if name == "aggregated":
                return kcl_put + ["--stream", stream, "--file", path, "--quiet", "--aggregate"]
            if name == "js":
                return ["node", peer, stream, path]
            if name in ("client", "curl"):
                # kcl put's pace: each shard takes 1,000 records/s, a call carries 500.
                pause_ms = max(1, round(500 / (args.shards * 1000) * 1000))
                return [floor, name, stream, path, str(pause_ms)]
            sys.exit(f"producer_e2e: unknown run {name} in --only")

        def run(name, count, rep):
            wrap = [w.replace("{name}", f"{name}{rep}-{count}") for w in args.wrap.split()]
            out_path = os.path.join(work, f"{name}-{rep}-{count}.out")
            with open(out_path, "w") as out:
                r = run_measured(wrap + command(name, fresh_stream(), inputs[count]), env,
                                 emu.pid, stdout=out)
            if name in ("client", "curl"):
                # The floor counts its sending thread only (no start-up, no file reading).
                with open(out_path) as f:
                    floor_run = json.loads(f.read().splitlines()[-1])
                r["cpu_s"] = floor_run["thread_cpu_ms"] / 1e3
                r["us_per_call"] = floor_run["us_per_call"]
            print(f"{name:10s} {count:8d} records  wall {r['wall_s']:6.2f} s  cpu "
                  f"{r['cpu_s']:6.2f} s  {r['cpu_s'] * 1e6 / count:6.2f} us/record  rss "
                  f"{r['rss_mb']:6.1f} MB  {args.server} cpu {r['emulator_cpu_s']:6.2f} s" +
                  (f"  {r['us_per_call']:6.1f} us/call" if "us_per_call" in r else ""),
                  flush=True)
            if name in ("plain", "aggregated") and not args.wrap:
                # kcl put's threads by name: the reading thread (the program's own name), the
                # producer's sender and request threads.
                print(f"{'':10s} threads: " + ", ".join(
                    f"{thread} {secs * 1e3:.0f} ms" +
                    (f" ({r['threads_by_name'][thread]})" if r['threads_by_name'][thread] > 1
                     else "")
                    for thread, secs in sorted(r["threads_cpu_s"].items(),
                                               key=lambda kv: -kv[1])), flush=True)
            return r

        names = args.only.split(",")
        runs = {name: [] for name in names}
        for rep in range(args.repeat):
            for name in names:
                runs[name].append(run(name, args.records, rep))
        large = {}
        if args.large:
            for name in [n for n in names if n != "js"]:
                large[name] = run(name, args.large, 0)

        results = {}
        for name, rs in runs.items():
            median = dict(sorted(rs, key=lambda r: r["cpu_s"])[len(rs) // 2])
            median["us_per_record"] = median["cpu_s"] * 1e6 / args.records
            median["rss_mb"] = max(r["rss_mb"] for r in rs)
            results[name] = median
        peer_us = results["js"]["us_per_record"] if "js" in results else None
        print(f"\n{args.records} records of {args.size} B into {args.shards} shards of "
              f"{args.server}" + (f", kcl put --wire {args.wire}" if args.wire else "") +
              f" (median of {args.repeat})")
        print(f"{'run':20s} {'CPU us/record':>14s} {'RSS MB':>8s} {'wall s':>8s} "
              f"{'JS peer / run':>14s}")
        for name, r in results.items():
            ratio = f"{peer_us / r['us_per_record']:13.1f}x" if peer_us else f"{'-':>14s}"
            print(f"{name:20s} {r['us_per_record']:14.2f} {r['rss_mb']:8.1f} "
                  f"{r['wall_s']:8.2f} {ratio}")
        for name, r in large.items():
            print(f"{name + ', ' + str(args.large):20s} {r['cpu_s'] * 1e6 / args.large:14.2f} "
                  f"{r['rss_mb']:8.1f} {r['wall_s']:8.2f}")
        print(json.dumps({"records": args.records, "size": args.size, "shards": args.shards,
                          "server": args.server, "wire": args.wire or "auto",
                          "results": results,
                          "large": {n: dict(r, records=args.large) for n, r in large.items()}}))
    finally:
        if emu.stdin:
            emu.stdin.close()
        for p in [emu] + others:
            p.terminate()
            p.wait(timeout=10)
        for f in os.listdir(work):
            os.unlink(os.path.join(work, f))
        os.rmdir(work)


if __name__ == "__main__":
    main()
