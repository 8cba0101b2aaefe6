#!/usr/bin/env python3
"""The kcl Python package against the MultiLangDaemon way and kcl-cpp's own consumer: records
per CPU-second of one trivial processor (count records, checkpoint every 5 s) run

  python     in process: kcl.Worker with a kcl.RecordProcessor (python/kcl), /usr/bin/python3
  multilang  `kcl multilang` with bench/multilang_counter.py as the child of each shard (the
             MultiLangDaemon protocol: JSON lines over pipes, base64 data)
  consume    `kcl consume > /dev/null` (JSON lines to stdout; the C++ baseline of the run)

over the same stream (kinesalite and dynalite on loopback, tools/emulators/serve.js), one
after another. Each run's CPU (user + system, the children of `kcl multilang` included) comes
from wait4(): the daemon's figure holds the children it stopped and reaped; a child it left
running is reparented to this script (a subreaper) and waited for (counted once, not twice).
Each consumer reads a stream of --records records and one of twice as many: the difference,
divided by --records, is the CPU of one more record, with the cost of a run whatever its
length (interpreter and worker start, lease table, stop) apart (as bench/consume_e2e.py
--marginal). Then the peak RSS of one Python process holding
--rss-shards shards, beside the RSS of `kcl multilang` and its children on the same stream.

  python3 bench/python_consume.py [--build-dir build/release] [--records 50000] [--shards 4]
                                  [--size 100] [--rss-shards 8] [--python /usr/bin/python3]
                                  [--repeat 3] [--installed]
  (--installed: the package pip installed for --python, e.g. --python ~/kcl-venv/bin/python)
"""
import argparse
import ctypes
import json
import os
import random
import string
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from consume_e2e import local_emulators, proc_cpu_seconds, run_measured  # noqa: E402


def child_main(stream, app, count):
    """--child: the in-process Python consumer; stops itself after `count` records."""
    import kcl
    lock = threading.Lock()
    total = [0]
    worker = None

    class Counter(kcl.RecordProcessor):
        def __init__(self):
            self.last_checkpoint = time.monotonic()

        def process_records(self, records, checkpointer):
            with lock:
                total[0] += len(records)
                done = total[0] >= count
            if time.monotonic() - self.last_checkpoint >= 5.0:
                checkpointer.checkpoint()
                self.last_checkpoint = time.monotonic()
            if done:
                worker.begin_shutdown()

        def shutdown_requested(self, checkpointer):
            checkpointer.checkpoint()

    worker = kcl.Worker(stream=stream, app=app, processor_factory=Counter,
                        initial_position="TRIM_HORIZON")
    worker.run()
    if total[0] < count:
        sys.exit("python_consume child: stopped after %d of %d records" % (total[0], count))


def children_of(pid):
    """The pids whose parent is pid (from any of its threads)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry) as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(entry))
            except OSError:
                pass
    return out


def status_kb(pid, field):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def become_subreaper():
    """A process that the measured daemon leaves running when it exits (an orphan) becomes a
    child of this script, not of init (Linux's PR_SET_CHILD_SUBREAPER), so Children.tree_cpu_s
    can wait for it and count its CPU."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


class Children:
    """Polled while `kcl multilang` runs: each child's last seen CPU and the tree's RSS."""

    def __init__(self):
        self.cpu = {}
        self.rss_mb = 0.0
        self.count = 0

    def poll(self, pid, sample_rss):
        kids = children_of(pid)
        for k in kids:
            try:
                self.cpu[k] = proc_cpu_seconds(k)
            except OSError:
                pass
        if sample_rss:
            self.count = len(kids)
            self.rss_mb = sum(status_kb(p, "VmRSS") for p in [pid] + kids) / 1024.0

    def cpu_s(self):
        return sum(self.cpu.values())

    def tree_cpu_s(self, daemon_wait4_cpu_s):
        """The CPU of the daemon and its children. wait4() on the daemon already counts the
        children it reaped itself (it stops each one and waits for it); a child it left running
        (reparented to this script, see become_subreaper) is waited for here and added."""
        extra = 0.0
        for k in self.cpu:
            deadline = time.monotonic() + 30
            while True:
                try:
                    pid, _, ru = os.wait4(k, os.WNOHANG)
                except ChildProcessError:
                    break  # reaped by the daemon: in its wait4 figure already
                if pid:
                    extra += ru.ru_utime + ru.ru_stime
                    break
                if time.monotonic() > deadline:
                    os.kill(k, 9)
                    deadline = float("inf")
                time.sleep(0.01)
        return daemon_wait4_cpu_s + extra


class Bench:
    def __init__(self, args, env, emulator_pid, work):
        self.args, self.env, self.emulator_pid, self.work = args, env, emulator_pid, work
        self.kcl = os.path.join(args.build_dir, "tools", "kcl", "kcl")
        self.runs = 0

    def load(self, stream, shards, count):
        subprocess.run([self.kcl, "create-stream", "--stream", stream, "--shards", str(shards)],
                       env=self.env, check=True, stdout=subprocess.DEVNULL)
        rnd = random.Random(1)
        body = "".join(rnd.choices(string.ascii_letters + string.digits, k=self.args.size - 8))
        lines = "".join("%07d %s\n" % (i, body) for i in range(count))
        subprocess.run([self.kcl, "put", "--stream", stream, "--quiet"], env=self.env,
                       check=True, input=lines.encode(), stdout=subprocess.DEVNULL)

    def run(self, mode, stream, count):
        """One consumer over `stream` until `count` records: wait4's figures and the RSS."""
        self.runs += 1
        app = "bench-%s-%d" % (mode, self.runs)
        if mode == "python":
            cmd = [self.args.python, os.path.abspath(__file__), "--child", stream, app,
                   str(count)]
            return run_measured(cmd, self.python_env(), self.emulator_pid)
        if mode == "consume":
            cmd = [self.kcl, "consume", "--stream", stream, "--app", app, "--from",
                   "trim-horizon", "--max", str(count), "--checkpoint-interval", "5000"]
            return run_measured(cmd, self.env, self.emulator_pid)
        return self.run_multilang(stream, app, count)

    def python_env(self):
        env = dict(self.env)
        if getattr(self.args, "installed", False):
            return env  # the package installed for --python (a venv's, from pip)
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [os.path.join(self.args.build_dir, "python"), env.get("PYTHONPATH")]))
        return env

    def run_multilang(self, stream, app, count):
        props = os.path.join(self.work, app + ".properties")
        progress = os.path.join(self.work, app + ".progress")
        with open(props, "w") as f:
            f.write("executableName = %s %s\nstreamName = %s\napplicationName = %s\n"
                    "initialPositionInStream = TRIM_HORIZON\n"
                    % (self.args.python, os.path.join(HERE, "multilang_counter.py"), stream,
                       app))
        open(progress, "w").close()
        env = dict(self.env, BENCH_PROGRESS=progress)
        children = Children()

        def finished(pid):
            with open(progress) as f:
                done = sum(int(x) for x in f.read().split()) >= count
            children.poll(pid, sample_rss=done and not children.count)
            return done

        r = run_measured([self.kcl, "multilang", props], env, self.emulator_pid,
                         stop_when=finished)
        r["children_cpu_s"] = children.cpu_s()  # as last seen, for the split only
        r["cpu_s"] = children.tree_cpu_s(r["cpu_s"])
        r["tree_rss_mb"], r["children"] = children.rss_mb, children.count
        return r


def measure(bench, args, streams):
    """Per mode and repetition: CPU of the N-record and 2N-record runs (modes in turn, the
    two streams' order alternating between repetitions)."""
    modes = ["python", "multilang", "consume"]
    runs = {m: [] for m in modes}
    for rep in range(args.repeat):
        for mode in modes:
            cpu = {}
            for stream, count in (streams if rep % 2 == 0 else streams[::-1]):
                r = bench.run(mode, stream, count)
                cpu[count] = r["cpu_s"]
                print("%-9s %8d records  wall %6.2f s  cpu %6.2f s  rss %6.1f MB" % (
                    mode, count, r["wall_s"], r["cpu_s"], r["rss_mb"]), flush=True)
            runs[mode].append(cpu)
    return runs


def median(xs):
    return sorted(xs)[len(xs) // 2]


def report(args, runs):
    """The median, per mode, of one more record's CPU, of the rest of a run, and of the whole
    run over the longer stream."""
    n = args.records
    per = {m: median([(c[2 * n] - c[n]) / n for c in cs]) for m, cs in runs.items()}
    rest = {m: median([c[n] for c in cs]) - per[m] * n for m, cs in runs.items()}
    whole = {m: median([c[2 * n] for c in cs]) / (2 * n) for m, cs in runs.items()}
    print("\nmedians of %d   one more record: CPU  records/CPU-s  rest of a run  "
          "whole run of %d: CPU/record  records/CPU-s" % (args.repeat, 2 * n))
    for m in per:
        print("%-12s %22.2f us %14.0f %11.0f ms %28.2f us %14.0f" % (
            m, per[m] * 1e6, 1 / per[m], rest[m] * 1e3, whole[m] * 1e6, 1 / whole[m]))
    print("\npython in process: %.1fx the records per CPU-second of kcl multilang with a Python "
          "child for one more record, %.1fx over a whole run of %d (goal >= 10x); %.2fx and "
          "%.2fx kcl consume's CPU per record (goal <= 3x)" % (
              per["multilang"] / per["python"], whole["multilang"] / whole["python"], 2 * n,
              per["python"] / per["consume"], whole["python"] / whole["consume"]))
    return per


def rss(bench, args):
    stream = "bench-rss-%d" % os.getpid()
    count = 1000 * args.rss_shards
    bench.load(stream, args.rss_shards, count)
    r = bench.run("python", stream, count)
    m = bench.run("multilang", stream, count)
    print("\n%d shards: one Python process (kcl.Worker) peak RSS %.1f MB (goal <= 80 MB); "
          "kcl multilang %.1f MB with %d Python children, %.1f MB together" % (
              args.rss_shards, r["rss_mb"], m["rss_mb"], m["children"], m["tree_rss_mb"]))
    return {"python_rss_mb": r["rss_mb"], "multilang_rss_mb": m["tree_rss_mb"],
            "multilang_children": m["children"]}


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        return child_main(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build", "release"))
    ap.add_argument("--records", type=int, default=50000)
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--rss-shards", type=int, default=8)
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--repeat", type=int, default=3,
                    help="run every consumer this many times (medians kept)")
    ap.add_argument("--installed", action="store_true",
                    help="the kcl package installed for --python (e.g. a venv's, by pip) "
                         "instead of the build tree's")
    args = ap.parse_args()
    become_subreaper()
    with local_emulators(KCL_LOG_LEVEL="warn") as (env, emu), \
            tempfile.TemporaryDirectory() as work:
        bench = Bench(args, env, emu.pid, work)
        streams = [("bench-py-%d" % os.getpid(), args.records),
                   ("bench-py2x-%d" % os.getpid(), 2 * args.records)]
        for stream, count in streams:
            t0 = time.monotonic()
            bench.load(stream, args.shards, count)
            print("loaded %d records of %d B into %d shards in %.1f s" % (
                count, args.size, args.shards, time.monotonic() - t0), flush=True)
        per = report(args, measure(bench, args, streams))
        extra = rss(bench, args)
    print(json.dumps({"records": args.records, "size": args.size, "shards": args.shards,
                      "us_per_record": {m: x * 1e6 for m, x in per.items()}, **extra}))

if __name__ == "__main__":
    main()
