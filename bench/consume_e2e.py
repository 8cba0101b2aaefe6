#!/usr/bin/env python3
"""End-to-end consume benchmark: CPU per record of kcl-cpp's consumers against kinesalite.

Starts kinesalite and dynalite on loopback (tools/emulators/serve.js), creates a stream of
--shards shards, writes --records records of --size bytes with `kcl put`, then reads them
all from TRIM_HORIZON with, one after another:
  tail      `kcl tail --max N > /dev/null`: a bare polling loop (no leases, no checkpoints),
            the baseline of the run
  library   bench_consume_noop: a kcl::Worker whose processor touches every byte and
            checkpoints each batch (the library alone)
  consume   `kcl consume --max N > /dev/null`: JSON lines to stdout, checkpoints on
  pull      examples/pull_workers --work-us 0 --stop-after N: a kcl::PullConsumer, 4 threads
            acking every record (out of order), the watermark checkpointed every second
Each consumer's CPU time (user + system) and peak RSS come from wait4() on its process, so
the emulators' CPU is not counted; the emulator's own CPU over each run is printed for scale.

  python3 bench/consume_e2e.py [--build-dir build/release] [--records 200000] [--shards 4]
                               [--size 100] [--only tail,library,consume,pull] [--wrap CMD]
"""
import argparse
import json
import os
import random
import string
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def proc_cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime + stime


def run_measured(cmd, env, emulator_pid, stdout=subprocess.DEVNULL):
    emu_before = proc_cpu_seconds(emulator_pid)
    start = time.monotonic()
    p = subprocess.Popen(cmd, env=env, stdout=stdout, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - start
    err = p.stderr.read().decode(errors="replace")
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"consume_e2e: {' '.join(cmd)} exited {p.returncode}:\n{err}")
    return {
        "wall_s": wall,
        "cpu_s": ru.ru_utime + ru.ru_stime,
        "rss_mb": ru.ru_maxrss / 1024.0,
        "emulator_cpu_s": proc_cpu_seconds(emulator_pid) - emu_before,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build", "release"))
    ap.add_argument("--records", type=int, default=200000)
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--only", default="tail,library,consume,pull")
    ap.add_argument("--wrap", default="",
                    help="a command put before each consumer, e.g. 'perf record -g -o P.data --' "
                         "(its CPU is then counted too: for profiles, not for figures)")
    args = ap.parse_args()
    kcl = os.path.join(args.build_dir, "tools", "kcl", "kcl")
    noop = os.path.join(args.build_dir, "bench", "bench_consume_noop")
    pull = os.path.join(args.build_dir, "examples", "example_pull_workers")
    for exe in (kcl, noop, pull):
        if not os.access(exe, os.X_OK):
            sys.exit(f"consume_e2e: {exe} not found; build first (cmake --build {args.build_dir})")

    emu = subprocess.Popen(["node", os.path.join(ROOT, "tools", "emulators", "serve.js")],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        urls = json.loads(emu.stdout.readline())
        env = dict(os.environ)
        env.update({
            "AWS_ENDPOINT_URL_KINESIS": urls["kinesis"],
            "AWS_ENDPOINT_URL_DYNAMODB": urls["dynamodb"],
            "AWS_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench-secret",
        })
        env.pop("AWS_PROFILE", None)
        stream = "bench-" + "".join(random.choices(string.ascii_lowercase, k=8))
        subprocess.run([kcl, "create-stream", "--stream", stream, "--shards", str(args.shards)],
                       env=env, check=True, stdout=subprocess.DEVNULL)
        rnd = random.Random(1)
        body = "".join(rnd.choices(string.ascii_letters + string.digits, k=args.size - 8))
        lines = "".join(f"{i:07d} {body}\n" for i in range(args.records))
        t0 = time.monotonic()
        subprocess.run([kcl, "put", "--stream", stream, "--quiet"], env=env, check=True,
                       input=lines.encode(), stdout=subprocess.DEVNULL)
        print(f"loaded {args.records} records of {args.size} B into {args.shards} shards "
              f"in {time.monotonic() - t0:.1f} s", flush=True)

        n = str(args.records)
        runs = {
            "tail": [kcl, "tail", "--stream", stream, "--from", "trim-horizon", "--max", n],
            "library": [noop, stream, "bench-lib-" + stream, n],
            "consume": [kcl, "consume", "--stream", stream, "--app", "bench-cli-" + stream,
                        "--from", "trim-horizon", "--max", n],
            "pull": [pull, stream, "bench-pull-" + stream, "--threads", "4", "--work-us", "0",
                     "--stop-after", n],
        }
        results = {}
        for name in args.only.split(","):
            results[name] = run_measured(args.wrap.split() + runs[name], env, emu.pid)
            r = results[name]
            print(f"{name:8s} wall {r['wall_s']:6.2f} s  cpu {r['cpu_s']:6.2f} s  "
                  f"{r['cpu_s'] * 1e6 / args.records:6.2f} us/record  rss {r['rss_mb']:6.1f} MB  "
                  f"emulator cpu {r['emulator_cpu_s']:6.2f} s", flush=True)
        base = results.get("tail")
        if base:
            for name, r in results.items():
                if name != "tail":
                    print(f"{name:8s} cpu/record = {r['cpu_s'] / base['cpu_s']:.2f} x tail "
                          f"(same run)")
        print(json.dumps({"records": args.records, "size": args.size, "shards": args.shards,
                          "results": results}))
    finally:
        emu.stdin.close()
        emu.terminate()
        emu.wait(timeout=10)


if __name__ == "__main__":
    main()
