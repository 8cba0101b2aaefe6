#!/usr/bin/env python3
"""kcl multilang's start-up and memory: the time from starting `kcl multilang` to the first
record a child processed, and the RSS of the daemon and of its children, on an 8-shard stream
on kinesalite and dynalite (tools/emulators/serve.js), with the aws-kcl Node processor of
tests/integration/multilang/record_writer.js as the child.

  python3 bench/multilang_startup.py     (after building build/release)
"""
import json, os, subprocess, time, sys
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
emu = subprocess.Popen(["node", root + "/tools/emulators/serve.js"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
urls = json.loads(emu.stdout.readline())
env = dict(os.environ, AWS_REGION="us-east-1", AWS_ACCESS_KEY_ID="x", AWS_SECRET_ACCESS_KEY="y",
           AWS_ENDPOINT_URL_KINESIS=urls["kinesis"], AWS_ENDPOINT_URL_DYNAMODB=urls["dynamodb"],
           KCL_NODE_MODULES=os.environ.get("KCL_NODE_MODULES", root + "/node_modules"), MULTILANG_OUT="/tmp/ml_measure.out", KCL_LOG_LEVEL="warn")
kcl = root + "/build/release/tools/kcl/kcl"
subprocess.run([kcl, "create-stream", "--stream", "mlm", "--shards", "8"], env=env, check=True, stdout=subprocess.DEVNULL)
subprocess.run([kcl, "put", "--stream", "mlm", "--quiet"], env=env, input=("\n".join("r%d" % i for i in range(800)) + "\n").encode(), check=True)
open("/tmp/ml_measure.properties", "w").write("executableName = node %s/tests/integration/multilang/record_writer.js\nstreamName = mlm\napplicationName = mlmapp\ninitialPositionInStream = TRIM_HORIZON\n" % root)
if os.path.exists("/tmp/ml_measure.out"): os.remove("/tmp/ml_measure.out")
t0 = time.monotonic()
p = subprocess.Popen([kcl, "multilang", "/tmp/ml_measure.properties"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
first = None; rss = 0; children_rss = 0
while time.monotonic() - t0 < 60:
    if first is None and os.path.exists("/tmp/ml_measure.out") and os.path.getsize("/tmp/ml_measure.out") > 0:
        first = time.monotonic() - t0
    try:
        for l in open("/proc/%d/status" % p.pid):
            if l.startswith("VmRSS"): rss = max(rss, int(l.split()[1]))
        kids = subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True, text=True).stdout.split()
        tot = 0
        for k in kids:
            for l in open("/proc/%s/status" % k):
                if l.startswith("VmRSS"): tot += int(l.split()[1])
        children_rss = max(children_rss, tot)
        nk = len(kids)
    except Exception: pass
    if first is not None and sum(1 for _ in open("/tmp/ml_measure.out")) >= 800 and time.monotonic() - t0 > first + 2: break
    time.sleep(0.05)
lines = sum(1 for _ in open("/tmp/ml_measure.out"))
p.terminate(); p.wait()
emu.stdin.close(); emu.terminate(); emu.wait()
print("start -> first record processed: %.2f s; records: %d; daemon RSS %.1f MB; %d children, %.1f MB RSS together" % (first, lines, rss/1024, nk, children_rss/1024))
