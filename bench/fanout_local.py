#!/usr/bin/env python3
"""Fan-out beside polling: `kcl consume`'s CPU per record, throughput and latency, same run.

The same stream read both ways in the same run, on kinesis-local or on a scripted server
that serves records as AWS does.

Run inside a network namespace of its own (kinesis-local listens on every interface):

  unshare -n python3 bench/fanout_local.py [--build-dir build/release] [--records 20000]
                                           [--marginal] [--server kinesis-local|scripted]
                                           [--record-bytes B] [--repeat K]
                                           [--wire json|cbor|auto]

1. Throughput: --records records of 100 B in 4 shards, read from TRIM_HORIZON to the end by
   `kcl consume --max N` (polling, then --fan-out): records/s over the consumer's wall time
   and its CPU per record (wait4, the consumer process only), and how many times its threads
   waited (voluntary context switches, wait4's ru_nvcsw).
2. Latency: both consumers run from LATEST while records are put one at a time every 50 ms,
   each carrying its put time; the time from put to the line appearing on the consumer's
   stdout, median and 99th percentile.
With --marginal, a second stream of twice --records records is loaded and both consumers read
it too; the difference of the two runs' CPU over --records is what one more record costs each
way, without the start-up (finding the stream consumer, taking leases) that a short run's
figure carries; it is also split by the consumer's threads (they name themselves:
kcl-shard-task for fetching and processing, kcl-fanout-io for fan-out's HTTP/2 transport,
...), read from /proc/PID/task/*/schedstat every 10 ms while the consumer runs.
kinesis-local is an emulator: it answers GetRecords at its own pace and pushes fan-out events
once a second, so the figures say how kcl-cpp behaves against it, not what AWS would give.

--server scripted serves the streams from bench/fanout_server.js instead (DynamoDB from
dynalite): events of up to 1 MB of records at 2 MB/s per shard, GetRecords answers of up to
10,000 records or 10 MB held to the same 2 MB/s, records of --record-bytes (1000 unless
given), made from their index, so both modes read the same bytes. Nothing can be put there:
it runs the throughput phase only. --repeat K reads each stream K times each way, taking
turns, and prints every run's figure and the medians.

--wire W passes `--wire W` to every `kcl consume` (polling and fan-out alike): the scripted
server answers GetRecords and SubscribeToShard in CBOR (record data as byte strings, as AWS
does) when asked in CBOR; without it kcl's default (auto) is used.
"""
import argparse
import base64
import statistics
import json
import os
import selectors
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from consume_e2e import (cpu_by_thread_name, require_own_network_namespace,  # noqa: E402
                         start_scripted, thread_cpu_seconds)


def wait_port(port, timeout=60):
    until = time.time() + timeout
    while time.time() < until:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.2)
    return False


def start_kinesis_local(nm):
    """kinesis-local on 4567 and dynalite on 4569: (processes, Kinesis URL, DynamoDB URL)."""
    require_own_network_namespace("fanout_local")
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    kl_env = dict(os.environ, KINESIS_MOCK_PLAIN_PORT="4567", KINESIS_MOCK_TLS_PORT="4568",
                  LOAD_DATA_IF_EXISTS="false", SHOULD_PERSIST_DATA="false")
    procs = [subprocess.Popen(["node", "main.js"], cwd=os.path.join(nm, "kinesis-local"),
                              env=kl_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
             subprocess.Popen(["node", os.path.join(nm, "dynalite", "cli.js"), "--host",
                               "127.0.0.1", "--port", "4569"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    if not (wait_port(4567) and wait_port(4569)):
        sys.exit("fanout_local: kinesis-local or dynalite did not start")
    return procs, "http://127.0.0.1:4567", "http://127.0.0.1:4569"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build", "release"))
    ap.add_argument("--records", type=int, default=20000)
    ap.add_argument("--latency-records", type=int, default=100)
    ap.add_argument("--marginal", action="store_true",
                    help="also read a stream of twice --records records: CPU per extra record")
    ap.add_argument("--server", choices=("kinesis-local", "scripted"), default="kinesis-local",
                    help="kinesis-local (in a network namespace: unshare -n) or "
                         "bench/fanout_server.js with dynalite")
    ap.add_argument("--record-bytes", type=int, default=0,
                    help="record size (100 on kinesis-local, 1000 on the scripted server)")
    ap.add_argument("--repeat", type=int, default=1, help="read each stream this many times")
    ap.add_argument("--wire", choices=("json", "cbor", "auto"), default=None,
                    help="kcl's --wire for every consumer (default: kcl's own, auto)")
    a = ap.parse_args()
    a.record_bytes = a.record_bytes or (1000 if a.server == "scripted" else 100)
    kcl = os.path.join(a.build_dir, "tools", "kcl", "kcl")
    nm = os.environ.get("KCL_NODE_MODULES", os.path.join(ROOT, "node_modules"))
    work = tempfile.mkdtemp(prefix="kcl-fanout-bench-")
    stream = "bench-fanout"
    streams = {stream: a.records}
    if a.marginal:
        streams[stream + "-2x"] = 2 * a.records
    if a.server == "scripted":
        procs, kinesis_url, dynamo_url = start_scripted(nm, streams.items(), a.record_bytes)
    else:
        procs, kinesis_url, dynamo_url = start_kinesis_local(nm)
    try:
        env = dict(os.environ, AWS_REGION="us-east-1", AWS_ACCESS_KEY_ID="AKIDBENCH",
                   AWS_SECRET_ACCESS_KEY="bench-secret", AWS_ENDPOINT_URL_KINESIS=kinesis_url,
                   AWS_ENDPOINT_URL_DYNAMODB=dynamo_url, KCL_LOG_LEVEL="warn")
        env.pop("AWS_PROFILE", None)

        def load(name, count):
            subprocess.run([kcl, "create-stream", "--stream", name, "--shards", "4"], env=env,
                           check=True, stdout=subprocess.DEVNULL)
            body = "".join("%07d %s\n" % (i, "x" * (a.record_bytes - 9)) for i in range(count))
            subprocess.run([kcl, "put", "--stream", name, "--quiet"], env=env, check=True,
                           input=body.encode(), stdout=subprocess.DEVNULL)
            print("loaded %d records of %d B into 4 shards of %s" % (count, a.record_bytes, name),
                  flush=True)

        if a.server == "kinesis-local":
            for name, count in streams.items():
                load(name, count)
        else:
            print("scripted server: %s, records of %d B in 4 shards, events of up to 1 MB at "
                  "2 MB/s per shard" % (", ".join("%s (%d records)" % kv for kv in
                                                  streams.items()), a.record_bytes), flush=True)
        runs = [0]

        def read_all(mode, name, count):
            runs[0] += 1
            cmd = [kcl] + (["--wire", a.wire] if a.wire else []) + [
                "consume", "--stream", name, "--app", "bench-%s-%d-%d" % (mode, count, runs[0]),
                "--from", "trim-horizon", "--max", str(count)]
            if mode == "fan-out":
                cmd += ["--fan-out", "--consumer-name", "bench-fanout-consumer"]
            start = time.monotonic()
            p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                                 stderr=open(os.path.join(work, "%s-%d.err" % (mode, count)), "w"))
            seen = {}  # the CPU of each of its threads, by name, as last seen (every 10 ms)
            while True:
                pid, status, ru = os.wait4(p.pid, os.WNOHANG)
                if pid:
                    break
                thread_cpu_seconds(p.pid, seen)
                time.sleep(0.01)
            wall = time.monotonic() - start
            if os.waitstatus_to_exitcode(status) != 0:
                sys.exit("fanout_local: %s exited %d" % (" ".join(cmd),
                                                         os.waitstatus_to_exitcode(status)))
            by_name = {name: secs for name, (secs, _) in cpu_by_thread_name(seen).items()}
            return wall, ru.ru_utime + ru.ru_stime, ru.ru_nvcsw, by_name

        results = throughput(a, read_all, stream)
        if a.server == "kinesis-local":
            latency(a, kcl, env, work, stream, results)
        base = results["polling"]["records_per_s"]
        print("fan-out throughput = %.2f x polling (same stream, same run)" %
              (results["fan-out"]["records_per_s"] / base))
        print(json.dumps(results))
    finally:
        for p in procs:
            p.kill()
            p.wait()
        shutil.rmtree(work, ignore_errors=True)


def latency(a, kcl, env, work, stream, results):
    """Both consumers from LATEST while records are put one at a time: put -> delivered."""
    consumers = {}
    sel = selectors.DefaultSelector()
    for mode in ("polling", "fan-out"):
        cmd = [kcl, "consume", "--stream", stream, "--app", "lat-" + mode, "--from", "latest"]
        if mode == "fan-out":
            cmd += ["--fan-out", "--consumer-name", "lat-fanout-consumer"]
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                             stderr=open(os.path.join(work, "lat-" + mode + ".err"), "w"))
        os.set_blocking(p.stdout.fileno(), False)
        sel.register(p.stdout, selectors.EVENT_READ, mode)
        consumers[mode] = {"proc": p, "buf": b"", "lat": []}
    putters = []
    try:
        time.sleep(8)  # both hold their leases and read from LATEST
        put_times = {}
        next_put = time.monotonic()
        sent = 0
        deadline = time.monotonic() + a.latency_records * 0.05 + 30
        while time.monotonic() < deadline:
            if sent < a.latency_records and time.monotonic() >= next_put:
                # One `kcl put` per record (it batches stdin until EOF); its start-up (a few
                # ms) counts in both modes' figures alike.
                put_times[sent] = time.time()
                q = subprocess.Popen([kcl, "put", "--stream", stream, "--quiet"], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
                q.stdin.write(("L%d\n" % sent).encode())
                q.stdin.close()
                putters.append(q)
                sent += 1
                next_put += 0.05
            for key, _ in sel.select(timeout=0.005):
                c = consumers[key.data]
                chunk = key.fileobj.read() or b""
                c["buf"] += chunk
                while b"\n" in c["buf"]:
                    line, c["buf"] = c["buf"].split(b"\n", 1)
                    data = base64.b64decode(json.loads(line)["data"]).decode()
                    if data.startswith("L"):
                        c["lat"].append(time.time() - put_times[int(data[1:])])
            if sent >= a.latency_records and all(len(c["lat"]) >= a.latency_records
                                                  for c in consumers.values()):
                break
        for q in putters:
            q.wait()
    except BaseException:
        # A failure midway (a bad line, an interrupt) stops both consumers and the puts.
        for q in putters + [c["proc"] for c in consumers.values()]:
            q.kill()
            q.wait()
        raise
    for mode, c in consumers.items():
        c["proc"].terminate()
        c["proc"].wait()
        lat = sorted(c["lat"])
        if not lat:
            print("%-8s latency: no record arrived" % mode)
            continue
        med = lat[len(lat) // 2] * 1000
        p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000
        results[mode].update({"latency_median_ms": med, "latency_p99_ms": p99,
                              "latency_samples": len(lat)})
        print("%-8s latency put -> delivered: median %6.0f ms, p99 %6.0f ms (%d records; "
              "kinesis-local pushes fan-out events once a second)" % (mode, med, p99,
                                                                      len(lat)), flush=True)


def throughput(a, read_all, stream):
    """Reads the stream (and with --marginal the one twice its size) both ways, --repeat
    times taking turns: {mode: figures}, medians over the repeats."""
    samples = {"polling": [], "fan-out": []}
    for rep in range(a.repeat):
        for mode in ("polling", "fan-out"):
            wall, cpu, waits, threads = read_all(mode, stream, a.records)
            sample = {"wall_s": wall, "records_per_s": a.records / wall,
                      "cpu_us_per_record": cpu * 1e6 / a.records, "waits": waits}
            print("%-8s throughput: %7.0f records/s (wall %.2f s incl. start-up), %.2f us CPU "
                  "per record, %d waits" % (mode, a.records / wall, wall,
                                            cpu * 1e6 / a.records, waits), flush=True)
            if a.marginal:
                wall2, cpu2, waits2, threads2 = read_all(mode, stream + "-2x", 2 * a.records)
                extra = (cpu2 - cpu) * 1e6 / a.records
                # The same difference thread by thread (kcl consume's threads name themselves:
                # kcl-shard-task, kcl-fanout-io, ... and "kcl" for the thread writing stdout).
                by_thread = {name: (threads2.get(name, 0) - threads.get(name, 0)) * 1e6 /
                             a.records for name in set(threads) | set(threads2)}
                sample.update({"extra_us_" + name: v for name, v in by_thread.items()})
                sample.update({"cpu_us_per_extra_record": extra,
                               "cpu_ms_per_run": (cpu - extra * a.records / 1e6) * 1e3})
                print("%-8s %d records: wall %.2f s, %.2f us CPU per record, %d waits; one "
                      "more record costs %.2f us, the rest of a %d-record run %.0f ms" %
                      (mode, 2 * a.records, wall2, cpu2 * 1e6 / (2 * a.records), waits2, extra,
                       a.records, sample["cpu_ms_per_run"]), flush=True)
                print("%-8s one more record by thread: %s" % (mode, ", ".join(
                    "%s %.2f us" % kv for kv in sorted(by_thread.items(), key=lambda kv: -kv[1])
                    if abs(kv[1]) >= 0.005)), flush=True)
            samples[mode].append(sample)
    results = {mode: {k: statistics.median(s.get(k, 0) for s in ss)
                      for k in set().union(*ss)} for mode, ss in samples.items()}
    if a.marginal:
        base = results["polling"]["cpu_us_per_extra_record"]
        fan = results["fan-out"]["cpu_us_per_extra_record"]
        ratio = "fan-out = %.2f x polling" % (fan / base) if base > 0 else "no ratio (too noisy)"
        print("one more record, median of %d: polling (baseline) %.2f us, fan-out %.2f us: %s" %
              (a.repeat, base, fan, ratio), flush=True)
        for mode in ("polling", "fan-out"):
            print("  %-8s by thread (medians): %s" % (mode, ", ".join(
                "%s %.2f us" % (k[len("extra_us_"):], v)
                for k, v in sorted(results[mode].items(), key=lambda kv: -kv[1])
                if k.startswith("extra_us_") and abs(v) >= 0.005)), flush=True)
    return results


if __name__ == "__main__":
    main()
