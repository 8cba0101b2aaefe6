#!/usr/bin/env python3
"""The CBOR wire end to end against kinesis-local, inside a network namespace of its own
(kinesis-local listens on every interface):

  unshare -n python3 kinesis_local_cbor.py --kcl build/release/tools/kcl/kcl --node-modules node_modules

1. `kcl put --wire cbor` writes binary records (every byte value but the newline that ends a
   line, and bytes that are not UTF-8) to a 2-shard stream: PutRecords in CBOR.
2. `kcl tail --wire cbor` reads them back (GetRecords in CBOR): every record, byte for byte.
3. `kcl tail --wire json` reads the same records (the JSON wire against the same server): the
   same bytes, so both wires agree on what was written.
4. `--wire auto` (the default) probes the server: against kinesis-local `kcl put` says it sent
   its PutRecords calls in CBOR, and `kcl tail` reads every record back byte for byte;
   against kinesalite (started beside it) `kcl put` sends them in JSON and `kcl tail` reads
   every record back (in CBOR kinesalite would store them as objects).
(CBOR error answers are checked in tests/unit/aws against a local HTTP server.)
Prints what it checked; exits 1 on a failure.
"""
import argparse
import base64
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

KL_PORT, KL_TLS_PORT = 4567, 4568
KINESALITE_PORT = 4569


def wait_port(port, timeout=60):
    until = time.time() + timeout
    while time.time() < until:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.2)
    return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kcl", required=True)
    ap.add_argument("--node-modules", required=True)
    ap.add_argument("--records", type=int, default=300)
    a = ap.parse_args()
    subprocess.run(["ip", "link", "set", "lo", "up"], check=False)
    work = tempfile.mkdtemp(prefix="kcl-cbor-local-")
    failures = []

    def check(ok, what):
        print(("ok   " if ok else "FAIL ") + what, flush=True)
        if not ok:
            failures.append(what)

    kl_env = dict(os.environ, KINESIS_MOCK_PLAIN_PORT=str(KL_PORT),
                  KINESIS_MOCK_TLS_PORT=str(KL_TLS_PORT), LOAD_DATA_IF_EXISTS="false",
                  SHOULD_PERSIST_DATA="false")
    kl = subprocess.Popen(["node", "main.js"], cwd=os.path.join(a.node_modules, "kinesis-local"),
                          env=kl_env, stdout=open(os.path.join(work, "kl.log"), "w"),
                          stderr=subprocess.STDOUT)
    ks = subprocess.Popen(["node", os.path.join(a.node_modules, "kinesalite", "cli.js"),
                           "--port", str(KINESALITE_PORT), "--createStreamMs", "0"],
                          stdout=open(os.path.join(work, "kinesalite.log"), "w"),
                          stderr=subprocess.STDOUT)
    try:
        if not wait_port(KL_PORT) or not wait_port(KINESALITE_PORT):
            print("kinesis-local or kinesalite did not start; logs in %s" % work,
                  file=sys.stderr)
            return 1
        env = dict(os.environ, AWS_REGION="us-east-1", AWS_ACCESS_KEY_ID="AKIDLOCAL",
                   AWS_SECRET_ACCESS_KEY="local",
                   AWS_ENDPOINT_URL_KINESIS="http://127.0.0.1:%d" % KL_PORT)
        env.pop("AWS_PROFILE", None)
        env_ks = dict(env, AWS_ENDPOINT_URL_KINESIS="http://127.0.0.1:%d" % KINESALITE_PORT)
        stream = "cbor-%d" % os.getpid()
        subprocess.run([a.kcl, "create-stream", "--stream", stream, "--shards", "2"], env=env,
                       check=True, stdout=subprocess.DEVNULL)

        # Records of every byte value but the newline, some not UTF-8, one per line.
        records = []
        for i in range(a.records):
            body = bytes((i * 7 + j) % 256 for j in range(i % 50 + 1)).replace(b"\n", b"\x0b")
            records.append(b"%d:" % i + body)
        put = subprocess.run([a.kcl, "put", "--wire", "cbor", "--stream", stream,
                              "--quiet"], env=env, input=b"".join(r + b"\n" for r in records),
                             capture_output=True)
        check(put.returncode == 0,
              "kcl put --wire cbor: %d binary records (%s)" %
              (len(records), put.stderr.decode(errors="replace").strip()[-300:]))

        def tail(wire, stream=stream, env=env):
            out = subprocess.run([a.kcl, "tail", "--wire", wire, "--stream", stream,
                                  "--from", "trim-horizon", "--max", str(len(records))],
                                 env=env, capture_output=True, timeout=120)
            got = [base64.b64decode(json.loads(line)["data"])
                   for line in out.stdout.decode().splitlines() if line.strip()]
            return out, got

        for wire in ("cbor", "json"):
            out, got = tail(wire)
            check(out.returncode == 0,
                  "kcl tail --wire %s exits 0 (%s)" %
                  (wire, out.stderr.decode(errors="replace").strip()[-300:]))
            check(sorted(got) == sorted(records),
                  "kcl tail --wire %s: %d records read, the %d put, byte for byte" %
                  (wire, len(got), len(records)))

        # --wire auto (the default): the probe picks CBOR on kinesis-local, JSON on kinesalite.
        for server, server_env, wire in (("kinesis-local", env, "CBOR"),
                                         ("kinesalite", env_ks, "JSON")):
            auto_stream = "auto-%d" % os.getpid()
            subprocess.run([a.kcl, "create-stream", "--stream", auto_stream, "--shards", "2"],
                           env=server_env, check=True, stdout=subprocess.DEVNULL)
            put = subprocess.run([a.kcl, "put", "--stream", auto_stream], env=server_env,
                                 input=b"".join(r + b"\n" for r in records), capture_output=True)
            said = put.stderr.decode(errors="replace").strip()
            check(put.returncode == 0 and ("PutRecords calls in %s," % wire) in said,
                  "%s: kcl put --wire auto sends PutRecords in %s (%s)" %
                  (server, wire, said[-300:]))
            out, got = tail("auto", auto_stream, server_env)
            check(out.returncode == 0 and sorted(got) == sorted(records),
                  "%s: kcl tail --wire auto: %d records read, the %d put, byte for byte (%s)" %
                  (server, len(got), len(records),
                   out.stderr.decode(errors="replace").strip()[-300:]))

    finally:
        for server in (kl, ks):
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
    if failures:
        print("kinesis-local CBOR: %d failure(s); logs in %s" % (len(failures), work))
        return 1
    print("kinesis-local CBOR: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
