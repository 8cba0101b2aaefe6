#!/usr/bin/env python3
"""Multi-stream fan-out with a worker killed: --workers `kcl consume --fan-out` workers of one
application read --streams streams of --shards shards each (one multi-stream lease table, a
stream consumer per stream) on kinesis-local and dynalite, while records are written to every
stream; one worker is killed with SIGKILL mid-way and started again. Prints the figures:

  records written / delivered / lost / delivered again (at-least-once after the kill)
  takeover: from the SIGKILL until every lease is held by a live worker
  caught up: from the last write until every record was printed
  kinesis-local requests by action (from its DEBUG log): GetRecords must be 0
  stream consumers: one per stream, each named after the application

With --baseline the same fleet first reads one stream of --streams x --shards shards (the same
number of leases and records, one-stream lease table) in the same run, and a last table puts
the two side by side: join (every worker holding leases), takeover, catch-up, lost, GetRecords.

Exits 0 when nothing was lost and no GetRecords was served, 1 otherwise. kinesis-local listens
on every interface, so this runs itself in a network namespace of its own (unshare -n).

  python3 bench/multi_stream_fanout.py [--build-dir build/release] [--node-modules DIR]
      [--workers 3] [--streams 4] [--shards 4] [--rounds 30] [--per-round 25] [--baseline]
"""
import argparse
import base64
import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration", "fanout_local"))
from kinesis_local_fanout import (DDB_PORT, KL_PORT, aws_env, count_actions,  # noqa: E402
                                  leases, lines, start_emulators, stop, wait_for,
                                  wait_port)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build", "release"))
    ap.add_argument("--node-modules",
                    default=os.environ.get("KCL_NODE_MODULES", os.path.join(ROOT, "node_modules")))
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--streams", type=int, default=4)
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=30, help="write rounds, 0.5 s apart")
    ap.add_argument("--per-round", type=int, default=25, help="records per stream per round")
    ap.add_argument("--failover-ms", type=int, default=4000)
    ap.add_argument("--baseline", action="store_true",
                    help="first the same on one stream of streams x shards shards")
    a = ap.parse_args()
    if os.environ.get("KCL_MSFO_NETNS") != "1":
        # kinesis-local binds every interface: give it a network namespace of its own.
        env = dict(os.environ, KCL_MSFO_NETNS="1")
        os.execvpe("unshare", ["unshare", "-n", sys.executable] + sys.argv, env)
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    kcl = os.path.join(a.build_dir, "tools", "kcl", "kcl")
    work = tempfile.mkdtemp(prefix="kcl-msfo-bench-")
    procs = start_emulators(a.node_modules, work, "DEBUG")
    try:
        if not (wait_port(KL_PORT) and wait_port(DDB_PORT)):
            print("kinesis-local or dynalite did not start", file=sys.stderr)
            return 1
        results = []
        if a.baseline:
            results.append(run(a, kcl, work, procs, 1, a.streams * a.shards))
        results.append(run(a, kcl, work, procs, a.streams, a.shards))
        if a.baseline:
            print()
            print("%-28s %12s %12s" % ("", "one stream", "%d streams" % a.streams))
            for key, fmt in (("layout", "%s"), ("join_s", "%.1f s"), ("takeover_s", "%.1f s"),
                             ("catch_up_s", "%.1f s"), ("lost", "%d"), ("again", "%d"),
                             ("get_records", "%d"), ("subscribe", "%d"), ("in_use", "%d")):
                print("%-28s %12s %12s" % (key, fmt % results[0][key], fmt % results[1][key]))
        return 0 if all(r["ok"] for r in results) else 1
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


PORTS = itertools.count(8100)  # the workers' --http ports (/metrics), one each


def run(a, kcl, work, procs, n_streams, n_shards):
    """One fleet on n_streams streams of n_shards shards; prints and returns its figures."""
    env = aws_env()
    app = "msfo-%d-%dx%d" % (os.getpid(), n_streams, n_shards)
    streams = ["%s-s%d" % (app, i) for i in range(n_streams)]
    for s in streams:
        subprocess.run([kcl, "create-stream", "--stream", s, "--shards", str(n_shards)], env=env,
                       check=True, stdout=subprocess.DEVNULL)
    per_round = a.per_round * a.streams // n_streams  # the same records whatever the layout
    total_leases = n_streams * n_shards
    actions_before = count_actions(os.path.join(work, "kl.log"))
    workers = {}  # worker id -> (process, output path)

    ports = {}  # worker id -> its --http port (/metrics)

    def start(wid):
        out = os.path.join(work, app + "-" + wid + ".out")
        ports[wid] = next(PORTS)
        cmd = [kcl, "consume", "--app", app, "--worker-id", wid, "--fan-out", "--from",
               "trim-horizon", "--checkpoint-interval", "1000", "--failover-ms",
               str(a.failover_ms), "--http", str(ports[wid])]
        for s in streams:
            cmd += ["--stream", s]
        p = subprocess.Popen(cmd, env=env, stdout=open(out, "w"),
                             stderr=open(os.path.join(work, app + "-" + wid + ".err"), "w"))
        procs.append(p)
        workers[wid] = (p, out)

    def held_by(live):
        held = leases(app)
        return len(held) == total_leases and all(x.get("leaseOwner") in live for x in held)

    def delivered():
        got = []
        for _, out in workers.values():
            for r in lines(out):
                rec = json.loads(base64.b64decode(r["data"]))
                got.append((r.get("streamName", streams[0]), rec["i"]))  # one stream: no name
        return got

    ids = ["w%d" % (i + 1) for i in range(a.workers)]
    t0 = time.time()
    for wid in ids:
        start(wid)
    formed = wait_for(lambda: held_by(set(ids)) and
                      len({x.get("leaseOwner") for x in leases(app)}) == len(ids), 120, 0.1)
    join_s = time.time() - t0
    print("%d streams x %d shards: %d workers hold the %d leases after %.1f s%s" %
          (n_streams, n_shards, len(ids), total_leases, join_s,
           "" if formed else " (NOT within 120 s)"), flush=True)

    written = set()
    write_errors = []

    def writer():
        for rnd in range(a.rounds):
            for s in streams:
                first = rnd * per_round
                body = "".join(json.dumps({"k": "k%d" % (i % 40), "i": i}) + "\n"
                               for i in range(first, first + per_round))
                r = subprocess.run([kcl, "put", "--stream", s, "--key-field", "k", "--quiet"],
                                   env=env, input=body.encode(), stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE)
                if r.returncode != 0:
                    write_errors.append(r.stderr.decode()[-300:])
                    continue
                written.update((s, i) for i in range(first, first + per_round))
            time.sleep(0.5)

    w = threading.Thread(target=writer)
    writes_from = time.time()
    w.start()
    time.sleep(max(1.0, a.rounds * 0.5 / 3))
    victim = ids[1] if len(ids) > 1 else ids[0]
    victim_proc = workers[victim][0]
    victim_proc.send_signal(signal.SIGKILL)
    victim_proc.wait()
    killed_at = time.time()
    print("SIGKILL %s at %.1f s into the writes" % (victim, killed_at - writes_from), flush=True)
    time.sleep(2)
    restarted = victim + "r"
    start(restarted)
    live = (set(ids) - {victim}) | {restarted}
    took_over = wait_for(lambda: held_by(live), 120, 0.1)
    takeover_s = time.time() - killed_at
    w.join()
    last_write = time.time()
    caught_up = wait_for(lambda: written <= set(delivered()), 180)
    catch_up_s = time.time() - last_write
    resubscribes = {}  # cause -> count, over the live workers (the killed one's are gone)
    for wid in sorted(live):
        try:
            text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % ports[wid],
                                          timeout=5).read().decode()
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith("kcl_fanout_resubscribes_total{"):
                cause = line.split('cause="', 1)[1].split('"', 1)[0]
                resubscribes[cause] = resubscribes.get(cause, 0) + float(line.rsplit(" ", 1)[1])
    for wid in list(live):
        stop(workers[wid][0])
    got = delivered()
    unique = set(got)
    lost = written - unique
    actions = count_actions(os.path.join(work, "kl.log"))
    for k, v in actions_before.items():
        actions[k] = actions.get(k, 0) - v
    actions = {k: v for k, v in actions.items() if v}
    consumers = {}
    for s in streams:
        listed = subprocess.run([kcl, "consumers", "--stream", s], env=env, capture_output=True,
                                text=True).stdout
        consumers[s] = app in listed
    owners = {}
    for x in leases(app):
        owners[x.get("leaseOwner")] = owners.get(x.get("leaseOwner"), 0) + 1

    print("workers %d, streams %d x %d shards = %d leases, fan-out" %
          (a.workers, n_streams, n_shards, total_leases))
    print("records written %d (write errors %d), delivered %d distinct, lost %d, delivered "
          "again %d" % (len(written), len(write_errors), len(unique), len(lost),
                        len(got) - len(unique)))
    print("takeover after SIGKILL of %s: every lease held by a live worker after %.1f s%s" %
          (victim, takeover_s, "" if took_over else " (NOT within 120 s)"))
    print("caught up %.1f s after the last write%s" %
          (catch_up_s, "" if caught_up else " (NOT within 180 s)"))
    print("kinesis-local requests: " + ", ".join("%s %d" % kv for kv in sorted(actions.items())))
    print("GetRecords %d, SubscribeToShard %d" %
          (actions.get("GetRecords", 0), actions.get("SubscribeToShard", 0)))
    print("resubscriptions of the live workers by cause: " + (", ".join(
        "%s %d" % (k, v) for k, v in sorted(resubscribes.items())) or "none"))
    print("stream consumer %s registered on %d of %d streams" %
          (app, sum(consumers.values()), len(streams)))
    print("leases at the end by owner: " + ", ".join("%s %d" % kv for kv in sorted(
        owners.items(), key=lambda kv: str(kv[0]))))
    ok = (formed and not lost and not write_errors and actions.get("GetRecords", 0) == 0 and
          took_over and caught_up and all(consumers.values()))
    if lost:
        print("lost, e.g.: %s" % sorted(lost)[:5])
    print("%d streams x %d shards, fan-out with a SIGKILL: %s (logs in %s)" %
          (n_streams, n_shards, "PASS" if ok else "FAIL", work), flush=True)
    return {"ok": ok, "layout": "%dx%d" % (n_streams, n_shards), "join_s": join_s,
            "takeover_s": takeover_s, "catch_up_s": catch_up_s, "lost": len(lost),
            "again": len(got) - len(unique), "get_records": actions.get("GetRecords", 0),
            "subscribe": actions.get("SubscribeToShard", 0),
            "in_use": int(resubscribes.get("in_use", 0))}


if __name__ == "__main__":
    sys.exit(main())
