#!/usr/bin/env python3
"""End-to-end consume benchmark: CPU per record of kcl-cpp's consumers against kinesalite.

Starts kinesalite and dynalite on loopback (tools/emulators/serve.js), creates a stream of
--shards shards, writes --records records of --size bytes with `kcl put`, then reads them
all from TRIM_HORIZON with, one after another:
  tail      `kcl tail --max N > /dev/null`: a bare polling loop (no leases, no checkpoints),
            the baseline of the run
  library   bench_consume_noop: a kcl::Worker whose processor touches every byte and
            checkpoints each batch (the library alone); --records-per-call N sets its
            max_records_per_call and max_prefetch_records (default: the library's, 10,000)
  consume   `kcl consume --max N > /dev/null`: JSON lines to stdout, checkpoints on
  pull      examples/pull_workers --work-us 0 --stop-after N: a kcl::PullConsumer, 4 threads
            acking every record (out of order), the watermark checkpointed every second
  lifion    bench/lifion_peer.js: lifion-kinesis (Node, polling, automatic checkpoints in
            DynamoDB), the peer; each `kcl consume` run's line says how many times its CPU
            per record lifion-kinesis's is
Each consumer's CPU time (user + system) comes from wait4() on its process, so the emulators'
CPU is not counted; its peak RSS is its VmHWM, polled while it runs (wait4's maxrss would
include this script's own RSS, which Linux carries across exec). The emulator's own CPU over
each run is printed for scale. --repeat N runs every consumer N times over the same stream
and keeps each one's median.

--marginal also loads a second stream of twice --records records and runs every consumer
over both streams in each repetition: the difference of the two runs' CPU, divided by
--records, is the cost of one more record, with what a run costs whatever its length
(process start, the worker's start and stop, its calls while it waits on the emulator, the
first touch of its buffers) taken out; that per-run part is printed beside it.

--server kinesis-local reads from kinesis-local (with dynalite) instead of kinesalite; it
listens on every interface, so run the script in a network namespace of its own
(`unshare -n`). --wire json,cbor runs `kcl tail` and `kcl consume` once per wire in each
repetition (`--wire` passed to kcl; the library and pull runs take the default, auto) and
prints each wire's CPU per record against the first's (e.g. "consume cbor/json").

--server scripted serves the streams from bench/fanout_server.js (DynamoDB from dynalite, on
loopback; no namespace needed): AWS's shapes in JSON and in CBOR, record data as CBOR byte
strings as AWS sends them (kinesis-local sends base64 text), GetRecords answers of up to
10,000 records held to 2 MB/s per shard. Its streams are full from the start (records of
--size bytes made from their index), so nothing is put. This is the run for the CBOR wire's
goal (CBOR's CPU per record <= 0.6 of JSON's, same run):
  python3 bench/consume_e2e.py --server scripted --wire json,cbor --only consume \
                               --records 200000 --repeat 3

  python3 bench/consume_e2e.py [--build-dir build/release] [--records 200000] [--shards 4]
                               [--size 100] [--only tail,library,consume,pull,lifion]
                               [--repeat N] [--records-per-call N] [--marginal] [--wrap CMD]
                               [--server kinesalite|kinesis-local|scripted]
                               [--wire json,cbor]
  unshare -n python3 bench/consume_e2e.py --server kinesis-local --wire json,cbor \
                               --only tail,consume,lifion --records 50000 --repeat 3
"""
import argparse
import contextlib
import json
import os
import random
import socket
import string
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def proc_cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime + stime


def peak_rss_mb_and_threads(pid):
    """From one read of /proc/PID/status: the process's own high-water RSS in MB (VmHWM of its
    address space) and its threads now, or (None, None) once it exited."""
    fields = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                name, _, value = line.partition(":")
                if name in ("VmHWM", "Threads"):
                    fields[name] = int(value.split()[0])
    except OSError:
        return None, None
    hwm = fields.get("VmHWM")
    return (None if hwm is None else hwm / 1024.0), fields.get("Threads")


def thread_cpu_seconds(pid, seen):
    """Reads the CPU time of each of PID's threads now (schedstat: nanoseconds on a CPU, not
    the tick-sampled utime/stime) into seen[tid] = (name, seconds); a thread that ended keeps
    its last reading."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                ns = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        seen[tid] = (name, ns / 1e9)


def cpu_by_thread_name(seen):
    """{thread name: (CPU seconds of the threads of that name, how many)} from
    thread_cpu_seconds() readings."""
    out = {}
    for name, secs in seen.values():
        total, count = out.get(name, (0.0, 0))
        out[name] = (total + secs, count + 1)
    return out


@contextlib.contextmanager
def local_emulators(**extra_env):
    """kinesalite and dynalite on loopback (tools/emulators/serve.js) for the length of the
    block; yields (environment reaching them with test credentials, the emulator process)."""
    emu = subprocess.Popen(["node", os.path.join(ROOT, "tools", "emulators", "serve.js")],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        urls = json.loads(emu.stdout.readline())
        env = dict(os.environ, AWS_ENDPOINT_URL_KINESIS=urls["kinesis"],
                   AWS_ENDPOINT_URL_DYNAMODB=urls["dynamodb"], AWS_REGION="us-east-1",
                   AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench-secret", **extra_env)
        env.pop("AWS_PROFILE", None)
        yield env, emu
    finally:
        emu.stdin.close()
        emu.terminate()
        emu.wait(timeout=10)


def require_own_network_namespace(tool):
    """kinesis-local binds every interface (and fixed ports): it runs only where loopback is the
    only interface, a network namespace of the benchmark's own (`unshare -n`)."""
    with open("/proc/self/net/dev") as f:
        interfaces = [line.split(":", 1)[0].strip() for line in f if ":" in line]
    others = [i for i in interfaces if i != "lo"]
    if others:
        sys.exit(f"{tool}: kinesis-local listens on every interface and this namespace has "
                 f"{', '.join(others)}; run it in a network namespace of its own: "
                 f"unshare -n python3 {' '.join(sys.argv)}")


def start_kinesis_local():
    """kinesis-local on 4567 and dynalite on 4569 in this network namespace (unshare -n: its
    loopback is brought up here): (kinesis-local's process, [dynalite's], URLs)."""
    require_own_network_namespace("consume_e2e")
    nm = os.environ.get("KCL_NODE_MODULES", os.path.join(ROOT, "node_modules"))
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    kl_env = dict(os.environ, KINESIS_MOCK_PLAIN_PORT="4567", KINESIS_MOCK_TLS_PORT="4568",
                  LOAD_DATA_IF_EXISTS="false", SHOULD_PERSIST_DATA="false", LOG_LEVEL="WARN")
    kl = subprocess.Popen(["node", "main.js"], cwd=os.path.join(nm, "kinesis-local"),
                          env=kl_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ddb = subprocess.Popen(["node", os.path.join(nm, "dynalite", "cli.js"), "--host",
                            "127.0.0.1", "--port", "4569"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for port in (4567, 4569):
        until = time.time() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.time() > until:
                    kl.kill()
                    ddb.kill()
                    sys.exit(f"consume_e2e: nothing listens on 127.0.0.1:{port} (kinesis-local "
                             "4567, dynalite 4569); run in a namespace of its own: unshare -n")
                time.sleep(0.2)
    return kl, [ddb], {"kinesis": "http://127.0.0.1:4567", "dynamodb": "http://127.0.0.1:4569"}


def first_line(proc, what):
    line = proc.stdout.readline()
    if not line:
        sys.exit("bench: %s did not start" % what)
    return json.loads(line)


def start_scripted(nm, streams, record_bytes, shards=None):
    """bench/fanout_server.js serving `streams` ((name, count) pairs) in `shards` shards (its
    default when None) and dynalite (tools/emulators), on loopback: (processes, Kinesis URL,
    DynamoDB URL). fanout_local.py --server scripted starts them here too."""
    args = ["node", os.path.join(ROOT, "bench", "fanout_server.js"), "--record-bytes",
            str(record_bytes)]
    if shards is not None:
        args += ["--shards", str(shards)]
    for name, count in streams:
        args += ["--stream", "%s=%d" % (name, count)]
    kinesis = subprocess.Popen(args, stdout=subprocess.PIPE)
    dynamo = subprocess.Popen(["node", os.path.join(ROOT, "tools", "emulators", "serve.js"),
                               "--dynamodb"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              env=dict(os.environ, KCL_NODE_MODULES=nm))
    procs = [kinesis, dynamo]
    try:
        port = first_line(kinesis, "fanout_server.js")["port"]
        return procs, "http://127.0.0.1:%d" % port, first_line(dynamo, "dynalite")["dynamodb"]
    except SystemExit:
        for p in procs:
            p.kill()
        raise


def run_measured(cmd, env, emulator_pid, stdout=subprocess.DEVNULL, stop_when=None):
    """Runs cmd to its end and measures it. stop_when(pid), if given, is called at each poll
    until the process exits; the first time it returns true the process gets SIGTERM (for a
    consumer that does not stop by itself, such as `kcl multilang`)."""
    # Peak RSS is polled from /proc/PID/status (VmHWM) while the consumer runs, not taken
    # from wait4(): Linux carries a process's maxrss across exec(), so wait4 would report at
    # least this Python process's own RSS (tens of MB once it built the records to load).
    emu_before = proc_cpu_seconds(emulator_pid)
    start = time.monotonic()
    p = subprocess.Popen(cmd, env=env, stdout=stdout, stderr=subprocess.PIPE)
    errs = []
    reader = threading.Thread(target=lambda: errs.append(p.stderr.read()), daemon=True)
    reader.start()
    rss = 0.0
    threads = 0
    per_thread = {}
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        thread_cpu_seconds(p.pid, per_thread)
        hwm, now_threads = peak_rss_mb_and_threads(p.pid)
        if hwm is not None:
            rss = max(rss, hwm)
        threads = max(threads, now_threads or 0)
        if stop_when is not None and stop_when(p.pid) and p.returncode is None:
            p.terminate()
            p.returncode = -1  # asked to stop (the real status comes from wait4 below)
        time.sleep(0.01)
    wall = time.monotonic() - start
    reader.join()
    err = (errs[0] if errs else b"").decode(errors="replace")
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"consume_e2e: {' '.join(cmd)} exited {p.returncode}:\n{err}")
    by_name = cpu_by_thread_name(per_thread)
    return {
        "wall_s": wall,
        "cpu_s": ru.ru_utime + ru.ru_stime,
        "rss_mb": rss,
        "threads_max": threads,  # the most threads seen at once (polled every 10 ms)
        # CPU seconds by thread name, as last seen (polled every 10 ms: a thread's last 10 ms
        # before the process ended can be missing)
        "threads_cpu_s": {name: round(secs, 3) for name, (secs, _) in by_name.items()},
        "threads_by_name": {name: n for name, (_, n) in by_name.items()},
        "emulator_cpu_s": proc_cpu_seconds(emulator_pid) - emu_before,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build", "release"))
    ap.add_argument("--records", type=int, default=200000)
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--only", default="tail,library,consume,pull")
    ap.add_argument("--repeat", type=int, default=1,
                    help="run the consumers this many times over the same stream (medians kept)")
    ap.add_argument("--records-per-call", type=int, default=0,
                    help="the library run's max_records_per_call and max_prefetch_records")
    ap.add_argument("--marginal", action="store_true",
                    help="also read a stream of twice --records records and print the cost of "
                         "one more record and the cost of a run apart")
    ap.add_argument("--wrap", default="",
                    help="a command put before each consumer, e.g. 'perf record -g -o "
                         "P-{name}.data --' ({name} becomes the consumer and repetition, with "
                         "-2x for --marginal's longer stream; its "
                         "CPU is then counted too: for profiles, not for figures)")
    ap.add_argument("--server", choices=("kinesalite", "kinesis-local", "scripted"),
                    default="kinesalite",
                    help="kinesalite (tools/emulators/serve.js), kinesis-local (in a network "
                         "namespace: unshare -n) or scripted (bench/fanout_server.js: AWS's "
                         "JSON and CBOR shapes, streams full from the start), with dynalite "
                         "every way")
    ap.add_argument("--wire", default="",
                    help="comma-separated wires (json, cbor, auto) for kcl tail and kcl "
                         "consume, each run in every repetition; default: kcl's default")
    args = ap.parse_args()
    wires = [w for w in args.wire.split(",") if w] or [""]
    for w in wires:
        if w not in ("", "json", "cbor", "auto"):
            sys.exit(f"consume_e2e: unknown wire {w} in --wire")
    kcl = os.path.join(args.build_dir, "tools", "kcl", "kcl")
    noop = os.path.join(args.build_dir, "bench", "bench_consume_noop")
    pull = os.path.join(args.build_dir, "examples", "example_pull_workers")
    needed = {"tail": kcl, "consume": kcl, "library": noop, "pull": pull}
    for exe in {kcl} | {needed[n] for n in args.only.split(",") if n in needed}:
        if not os.access(exe, os.X_OK):
            sys.exit(f"consume_e2e: {exe} not found; build first (cmake --build {args.build_dir})")

    suffix = "".join(random.choices(string.ascii_lowercase, k=8))
    # (stream, record count) pairs each consumer reads in every repetition.
    streams = [("bench-" + suffix, args.records)]
    if args.marginal:
        streams.append(("bench2x-" + suffix, 2 * args.records))
    if args.server == "kinesis-local":
        emu, others, urls = start_kinesis_local()
    elif args.server == "scripted":
        nm = os.environ.get("KCL_NODE_MODULES", os.path.join(ROOT, "node_modules"))
        procs, kinesis_url, dynamo_url = start_scripted(
            nm, streams, args.size, args.shards)
        emu, others = procs[0], procs[1:]
        urls = {"kinesis": kinesis_url, "dynamodb": dynamo_url}
    else:
        emu = subprocess.Popen(["node", os.path.join(ROOT, "tools", "emulators", "serve.js")],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        others = []
        urls = None
    try:
        urls = urls or json.loads(emu.stdout.readline())
        env = dict(os.environ)
        env.update({
            "AWS_ENDPOINT_URL_KINESIS": urls["kinesis"],
            "AWS_ENDPOINT_URL_DYNAMODB": urls["dynamodb"],
            "AWS_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench-secret",
        })
        env.pop("AWS_PROFILE", None)
        rnd = random.Random(1)
        body = "".join(rnd.choices(string.ascii_letters + string.digits, k=args.size - 8))

        def load(stream, count):
            subprocess.run([kcl, "create-stream", "--stream", stream, "--shards",
                            str(args.shards)], env=env, check=True, stdout=subprocess.DEVNULL)
            lines = "".join(f"{i:07d} {body}\n" for i in range(count))
            t0 = time.monotonic()
            subprocess.run([kcl, "put", "--stream", stream, "--quiet"], env=env, check=True,
                           input=lines.encode(), stdout=subprocess.DEVNULL)
            print(f"loaded {count} records of {args.size} B into {args.shards} shards "
                  f"of {stream} in {time.monotonic() - t0:.1f} s", flush=True)

        for stream, count in streams:
            if args.server == "scripted":
                print(f"scripted server: {count} records of {args.size} B in {args.shards} "
                      f"shards of {stream}", flush=True)
            else:
                load(stream, count)

        def command(run, stream, count, rep):
            name, _, wire = run.partition(":")
            n = str(count)
            tag = f"{stream}-{rep}" + (f"-{wire}" if wire else "")
            kcl_wire = [kcl, "--wire", wire] if wire else [kcl]
            if name == "tail":
                return kcl_wire + ["tail", "--stream", stream, "--from", "trim-horizon",
                                   "--max", n]
            if name == "library":
                return [noop, stream, "bench-lib-" + tag, n] + (
                    [str(args.records_per_call)] if args.records_per_call else [])
            if name == "consume":
                return kcl_wire + ["consume", "--stream", stream, "--app", "bench-cli-" + tag,
                        "--from", "trim-horizon", "--max", n]
            if name == "lifion":
                return ["node", os.path.join(ROOT, "bench", "lifion_peer.js"), stream,
                        "bench-lifion-" + tag, n]
            if name == "pull":
                return [pull, stream, "bench-pull-" + tag, "--threads", "4", "--work-us", "0",
                        "--stop-after", n]
            sys.exit(f"consume_e2e: unknown consumer {name} in --only")

        # Each repetition runs every consumer once per stream, in turn (fresh application
        # names, so each reads the whole stream; with --marginal the order of the two streams
        # alternates between repetitions); the figures kept per consumer are its median.
        # With --wire, tail and consume run once per wire: "consume:cbor", "consume:json".
        names = [f"{name}:{w}" if w and name in ("tail", "consume") else name
                 for name in args.only.split(",") for w in wires]
        names = list(dict.fromkeys(names))
        all_runs = {name: [] for name in names}
        extra = {name: [] for name in names}  # per repetition: (cpu 2N - cpu N) / N
        for rep in range(args.repeat):
            for name in names:
                cpu = {}
                for stream, count in (streams if rep % 2 == 0 else streams[::-1]):
                    # {name}: the consumer and repetition, and "-2x" for the longer stream's run.
                    tag = f"{name}{rep}" + ("-2x" if count != args.records else "")
                    wrap = [w.replace("{name}", tag) for w in args.wrap.split()]
                    r = run_measured(wrap + command(name, stream, count, rep), env, emu.pid)
                    cpu[count] = r["cpu_s"]
                    if count == args.records:
                        all_runs[name].append(r)
                    print(f"{name:8s} {count:8d} records  wall {r['wall_s']:6.2f} s  cpu "
                          f"{r['cpu_s']:6.2f} s  {r['cpu_s'] * 1e6 / count:6.2f} us/record  rss "
                          f"{r['rss_mb']:6.1f} MB  emulator cpu {r['emulator_cpu_s']:6.2f} s",
                          flush=True)
                if args.marginal:
                    extra[name].append((cpu[2 * args.records] - cpu[args.records]) /
                                       args.records)
        results = {}
        for name, rs in all_runs.items():
            results[name] = sorted(rs, key=lambda r: r["cpu_s"])[len(rs) // 2]
            results[name]["cpu_s_runs"] = [r["cpu_s"] for r in rs]
            if args.marginal:
                per_extra = sorted(extra[name])[len(extra[name]) // 2]
                results[name]["us_per_extra_record"] = per_extra * 1e6
                results[name]["us_per_extra_record_runs"] = [x * 1e6 for x in extra[name]]
                results[name]["ms_per_run"] = (results[name]["cpu_s"] -
                                               per_extra * args.records) * 1e3
        base = results.get("tail") or results.get(f"tail:{wires[0]}")
        for name, r in results.items():
            line = (f"{name:8s} median of {args.repeat}: {r['cpu_s'] * 1e6 / args.records:.2f} "
                    f"us/record  rss {max(x['rss_mb'] for x in all_runs[name]):.1f} MB")
            if base and not name.startswith("tail"):
                line += f"  cpu/record = {r['cpu_s'] / base['cpu_s']:.2f} x tail (same run)"
            if "lifion" in results and name.startswith("consume"):
                line += (f"  lifion-kinesis/{name.replace(':', ' ')} = "
                         f"{results['lifion']['cpu_s'] / r['cpu_s']:.1f}x (same run)")
            first = results.get(name.partition(":")[0] + ":" + wires[0])
            if first is not None and first is not r:
                line += (f"  {name.replace(':', ' ')}/{wires[0]} = "
                         f"{r['cpu_s'] / first['cpu_s']:.2f} (same run)")
            print(line)
            if args.marginal:
                runs_text = ", ".join(f"{x:.2f}" for x in r["us_per_extra_record_runs"])
                print(f"{'':8s} one more record: {r['us_per_extra_record']:.2f} us (runs: "
                      f"{runs_text}); the rest of a {args.records}-record run: "
                      f"{r['ms_per_run']:.0f} ms")
        print(json.dumps({"records": args.records, "size": args.size, "shards": args.shards,
                          "server": args.server, "marginal": args.marginal,
                          "results": results}))
    finally:
        if emu.stdin:
            emu.stdin.close()
        for p in [emu] + others:
            p.terminate()
            p.wait(timeout=10)


if __name__ == "__main__":
    main()
