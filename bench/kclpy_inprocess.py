#!/usr/bin/env python3
"""An amazon_kclpy application in process against the same program as MultiLangDaemon
children: records per CPU-second and RSS of bench/kclpy_app.py (a version 3 processor as
AWS's sample writes one: every record decoded, a checkpoint every 5 s) run

  inprocess  `python3 -m kcl.kclpy app.properties`: one process, a kcl.Worker, one processor
             instance per shard
  multilang  `kcl multilang app.properties` with one Python child per shard running the same
             program (executableName = python3 -m kcl.kclpy --child kclpy_app.py: kcl-cpp's
             implementation of amazon_kclpy's child side, JSON lines and base64 over pipes,
             since AWS's amazon_kclpy cannot be installed offline here)

over the same streams (kinesalite and dynalite on loopback), one after another. CPU is user +
system from wait4() (the children of `kcl multilang` included, each once: those the daemon
reaped are in its figure, one it left running is waited for here). Each mode reads
a stream of --records records and one of twice as many over --shards shards: the difference,
divided by --records, is the CPU of one more record (start-up and shutdown apart); the whole
run of the longer stream is reported too. RSS: the in-process runner's peak against the
daemon's and its children's RSS summed once the stream is read.

  python3 bench/kclpy_inprocess.py [--build-dir build/release] [--records 40000] [--shards 8]
                                   [--size 100] [--python /usr/bin/python3] [--repeat 3]
"""
import argparse
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from consume_e2e import local_emulators, run_measured  # noqa: E402
from python_consume import Bench, Children, become_subreaper, median  # noqa: E402

APP = os.path.join(HERE, "kclpy_app.py")


class KclpyBench(Bench):
    def properties(self, stream, app, executable):
        path = os.path.join(self.work, app + ".properties")
        with open(path, "w") as f:
            f.write("executableName = %s\nstreamName = %s\napplicationName = %s\n"
                    "initialPositionInStream = TRIM_HORIZON\nregionName = us-east-1\n"
                    "AwsCredentialsProvider = DefaultCredentialsProvider\n"
                    % (executable, stream, app))
        return path

    def run(self, mode, stream, count):
        self.runs += 1
        app = "bench-kclpy-%s-%d" % (mode, self.runs)
        progress = os.path.join(self.work, app + ".progress")
        open(progress, "w").close()
        env = dict(self.python_env(), BENCH_PROGRESS=progress)
        children = Children()

        def finished(pid):
            with open(progress) as f:
                done = sum(int(x) for x in f.read().split()) >= count
            if mode == "multilang":
                children.poll(pid, sample_rss=done and not children.count)
            return done

        if mode == "inprocess":
            props = self.properties(stream, app, APP)
            cmd = [self.args.python, "-m", "kcl.kclpy", props, "--log-level", "WARNING"]
        else:
            props = self.properties(stream, app, "%s -m kcl.kclpy --child %s"
                                    % (self.args.python, APP))
            cmd = [self.kcl, "multilang", props]
        r = run_measured(cmd, env, self.emulator_pid, stop_when=finished)
        if mode == "multilang":
            r["children_cpu_s"] = children.cpu_s()  # as last seen, for the split only
            r["cpu_s"] = children.tree_cpu_s(r["cpu_s"])
            r["tree_rss_mb"], r["children"] = children.rss_mb, children.count
        return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build", "release"))
    ap.add_argument("--records", type=int, default=40000)
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    become_subreaper()
    modes = ["inprocess", "multilang"]
    with local_emulators(KCL_LOG_LEVEL="warn") as (env, emu), \
            tempfile.TemporaryDirectory() as work:
        bench = KclpyBench(args, env, emu.pid, work)
        n = args.records
        streams = [("bench-kclpy-%d" % os.getpid(), n), ("bench-kclpy2x-%d" % os.getpid(), 2 * n)]
        for stream, count in streams:
            t0 = time.monotonic()
            bench.load(stream, args.shards, count)
            print("loaded %d records of %d B into %d shards in %.1f s" % (
                count, args.size, args.shards, time.monotonic() - t0), flush=True)
        cpu = {m: [] for m in modes}
        rss = {m: [] for m in modes}
        for rep in range(args.repeat):
            for mode in modes:
                got = {}
                for stream, count in (streams if rep % 2 == 0 else streams[::-1]):
                    r = bench.run(mode, stream, count)
                    got[count] = r["cpu_s"]
                    mb = r["rss_mb"] if mode == "inprocess" else r["tree_rss_mb"]
                    if count == 2 * n:
                        rss[mode].append(mb)
                    extra = " (%d children)" % r["children"] if mode == "multilang" else ""
                    print("%-9s %7d records  wall %6.2f s  cpu %6.2f s  rss %6.1f MB%s" % (
                        mode, count, r["wall_s"], r["cpu_s"], mb, extra), flush=True)
                cpu[mode].append(got)
    per = {m: median([(c[2 * n] - c[n]) / n for c in cs]) for m, cs in cpu.items()}
    whole = {m: median([c[2 * n] for c in cs]) / (2 * n) for m, cs in cpu.items()}
    mem = {m: median(v) for m, v in rss.items()}
    print("\nmedians of %d      one more record: CPU  records/CPU-s   whole run of %d: "
          "records/CPU-s   RSS" % (args.repeat, 2 * n))
    for m in modes:
        print("%-12s %24.2f us %14.0f %32.0f %8.1f MB" % (m, per[m] * 1e6, 1 / per[m],
                                                           1 / whole[m], mem[m]))
    print("\nin process: %.1fx the records per CPU-second of kcl multilang with a child per "
          "shard for one more record, %.1fx over a whole run (goal >= 10x); RSS %.1f MB "
          "against %.1f MB (goal <= 80 MB)" % (per["multilang"] / per["inprocess"],
                                               whole["multilang"] / whole["inprocess"],
                                               mem["inprocess"], mem["multilang"]))
    print(json.dumps({"records": n, "shards": args.shards, "size": args.size,
                      "us_per_record": {m: round(per[m] * 1e6, 3) for m in modes},
                      "whole_run_us_per_record": {m: round(whole[m] * 1e6, 3) for m in modes},
                      "rss_mb": {m: round(mem[m], 1) for m in modes}}))


if __name__ == "__main__":
    main()
