#!/usr/bin/env python3
"""Start-up: the time from starting `kcl consume` to its first record on stdout, on an 8-shard
stream holding records, with leader-based assignment (the default: the leader waits
--settle-ms, 200 ms, for a fleet starting together), with leader-based assignment and
--settle-ms 0, and, as the baseline in the same run, with every worker taking leases
(--assignment worker-takes). Each run uses a new application (a new lease table), as a first
deployment does.

  python3 bench/startup.py [--repeat 5] [--build-dir build/release]
"""
import argparse, json, os, re, statistics, subprocess, sys, time

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ap = argparse.ArgumentParser()
ap.add_argument("--repeat", type=int, default=5)
ap.add_argument("--shards", type=int, default=8)
ap.add_argument("--build-dir", default=os.path.join(root, "build", "release"))
args = ap.parse_args()
kcl = os.path.join(args.build_dir, "tools", "kcl", "kcl")

emu = subprocess.Popen(["node", os.path.join(root, "tools", "emulators", "serve.js")],
                       stdin=subprocess.PIPE, stdout=subprocess.PIPE)
try:
    urls = json.loads(emu.stdout.readline())
    env = dict(os.environ, AWS_REGION="us-east-1", AWS_ACCESS_KEY_ID="x", AWS_SECRET_ACCESS_KEY="y",
               AWS_ENDPOINT_URL_KINESIS=urls["kinesis"], AWS_ENDPOINT_URL_DYNAMODB=urls["dynamodb"],
               KCL_LOG_LEVEL="warn")
    subprocess.run([kcl, "create-stream", "--stream", "startup", "--shards", str(args.shards)],
                   env=env, check=True, stdout=subprocess.DEVNULL)
    lines = "".join("record %d\n" % i for i in range(100 * args.shards))
    subprocess.run([kcl, "put", "--stream", "startup", "--quiet"], env=env, input=lines.encode(),
                   check=True)

    modes = {"leader": ["--assignment", "leader"],
             "leader, settle 0": ["--assignment", "leader", "--settle-ms", "0"],
             "worker-takes": ["--assignment", "worker-takes"]}

    def first_record(mode, run):
        app = "startup-%d-%d" % (list(modes).index(mode), run)
        cmd = [kcl, "consume", "--stream", "startup", "--app", app, "--from", "trim-horizon",
               "--max", "1", "--raw"] + modes[mode]
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        line = p.stdout.readline()
        took = time.monotonic() - t0
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            sys.exit("kcl consume --max 1 did not stop within 60 s of its first record")
        if not line:
            sys.exit("kcl consume --assignment %s printed nothing" % mode)
        return took

    def cold_start(workers, run):
        """Starts `workers` at once with the defaults; returns (handoffs, assigned) the leader
        logged in the first 5 s."""
        app = "startup-fleet-%d" % run
        cmd = [kcl, "consume", "--stream", "startup", "--app", app, "--from", "trim-horizon",
               "--raw"]
        fleet_env = dict(env, KCL_LOG_LEVEL="info")
        procs = [subprocess.Popen(cmd, env=fleet_env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True) for _ in range(workers)]
        time.sleep(5)
        for p in procs:
            p.terminate()
        handoffs = assigned = 0
        for p in procs:
            _, err = p.communicate(timeout=60)
            for m in re.finditer(r"assigned (\d+) leases, started (\d+) handoffs", err):
                assigned += int(m.group(1))
                handoffs += int(m.group(2))
        return handoffs, assigned

    results = {mode: [] for mode in modes}
    for run in range(args.repeat):
        for mode in results:
            results[mode].append(first_record(mode, run))
    print("start of kcl consume to its first record, %d shards, %d runs each:" %
          (args.shards, args.repeat))
    base = statistics.median(results["worker-takes"])
    for mode, times in results.items():
        med = statistics.median(times)
        print("  %-17s median %.3f s  (min %.3f, max %.3f)  %.2fx the worker-takes baseline" %
              (mode, med, min(times), max(times), med / base))
    fleets = [cold_start(4, run) for run in range(min(args.repeat, 3))]
    print("4 workers started at once (defaults), first 5 s: handoffs %s, leases assigned %s" %
          ([h for h, _ in fleets], [a for _, a in fleets]))
finally:
    emu.stdin.close()
    emu.wait(timeout=10)
