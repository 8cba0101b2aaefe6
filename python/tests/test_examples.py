"""The examples of examples/python, run as a user would, against the emulators; and the type
stubs, checked by mypy (Debian's python3-mypy) on the examples and the package."""
from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys

import pytest

from conftest import ROOT, wait_until

EXAMPLES = os.path.join(ROOT, "examples", "python")


def run_example(emulators, name, *args, **kwargs):
    return subprocess.run([sys.executable, os.path.join(EXAMPLES, name), *args],
                          env=emulators.env(), capture_output=True, text=True, timeout=120,
                          **kwargs)


def test_producer_then_pull_pipeline(emulators, names):
    stream, app = names("s"), names("app")
    emulators.kinesis.create_stream(stream, 2)
    lines = "".join("user-%d event-%d\n" % (i % 5, i) for i in range(200))
    r = run_example(emulators, "producer.py", stream, "--key-field", "1", input=lines)
    assert r.returncode == 0, r.stderr
    assert sum(int(line.split()[1]) for line in r.stdout.splitlines()) == 200
    r = run_example(emulators, "pull_pipeline.py", stream, app, "--max", "200")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "finished 200 records"
    leases = emulators.dynamodb.leases(app)
    assert len(leases) == 2 and all(v["checkpoint"].isdigit() for v in leases.values())


def test_record_counter_until_ctrl_c(emulators, names):
    stream, app = names("s"), names("app")
    emulators.kinesis.create_stream(stream, 2)
    put = emulators.kinesis.put_records(stream, [("k%d" % i, b"x") for i in range(150)])
    last = {}
    for p in put:
        last[p["ShardId"]] = p["SequenceNumber"]
    p = subprocess.Popen([sys.executable, os.path.join(EXAMPLES, "record_counter.py"), stream,
                          app, "--checkpoint-every", "0"], env=emulators.env(),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: {k: v["checkpoint"] for k, v in
                            emulators.dynamodb.leases(app).items()} == last,
                   what="the counter's checkpoints at the last records")
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err
    assert out.splitlines()[-1] == "total 150"


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None,
                    reason="mypy not installed (Debian: python3-mypy)")
def test_the_stubs_type_check_the_examples_and_the_package():
    import kcl
    package_dir = os.path.dirname(os.path.dirname(kcl.__file__))
    for target in ([EXAMPLES], ["-p", "kcl"]):
        r = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental",
                            "--cache-dir", "/dev/null", *target],
                           env=dict(os.environ, MYPYPATH=package_dir), capture_output=True,
                           text=True, timeout=300, cwd=package_dir)
        assert r.returncode == 0, r.stdout + r.stderr
