"""Fixtures: kinesalite and dynalite on free loopback ports (tools/emulators/serve.js, one
pair for the session), a fresh stream per test, and the options pointing kcl at them."""
from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from typing import Any, Callable, Dict, Iterator

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from aws_local import DynamoDB, Kinesis  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_names = itertools.count()


class Emulators:
    def __init__(self) -> None:
        modules = os.environ.get("KCL_NODE_MODULES", os.path.join(ROOT, "node_modules"))
        self.proc = subprocess.Popen(
            [os.environ.get("KCL_NODE", "node"), os.path.join(ROOT, "tools/emulators/serve.js")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            env=dict(os.environ, KCL_NODE_MODULES=modules))
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("tools/emulators/serve.js did not start (node_modules in %s? "
                               "run scripts/install-deps.sh)" % modules)
        urls = json.loads(line)
        self.kinesis_url = urls["kinesis"]
        self.dynamodb_url = urls["dynamodb"]
        self.kinesis = Kinesis(self.kinesis_url)
        self.dynamodb = DynamoDB(self.dynamodb_url)

    def env(self) -> Dict[str, str]:
        """The environment a child process (a worker, kcl) needs to reach the emulators."""
        return dict(os.environ, AWS_REGION="us-east-1", AWS_ACCESS_KEY_ID="test",
                    AWS_SECRET_ACCESS_KEY="test", AWS_ENDPOINT_URL_KINESIS=self.kinesis_url,
                    AWS_ENDPOINT_URL_DYNAMODB=self.dynamodb_url)

    def stop(self) -> None:
        self.proc.stdin.close()  # serve.js exits when its stdin closes
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="session")
def emulators() -> Iterator[Emulators]:
    e = Emulators()
    yield e
    e.stop()


@pytest.fixture
def names() -> Callable[[str], str]:
    """Unique names (streams, applications) for this test."""
    return lambda prefix: "%s-%d-%d" % (prefix, os.getpid(), next(_names))


@pytest.fixture
def options(emulators: Emulators) -> Dict[str, Any]:
    """kcl options for the emulators, with short intervals so tests run fast."""
    return dict(region="us-east-1", access_key_id="test", secret_access_key="test",
                kinesis_endpoint_url=emulators.kinesis_url,
                dynamodb_endpoint_url=emulators.dynamodb_url,
                initial_position="TRIM_HORIZON", idle_time_between_calls=0.05,
                min_call_interval=0.02, failover_time=3.0, shard_sync_interval=1.0,
                parent_check_interval=0.1, scheduler_interval=0.1,
                failure_backoff_base=0.05, failure_backoff_max=0.2)


def wait_until(condition: Callable[[], Any], timeout: float = 60.0, what: str = "") -> Any:
    """Polls `condition` until it returns something true; fails the test after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for " + (what or repr(condition)))
        time.sleep(0.05)


class Running:
    """A kcl.Worker's run() on a thread of its own; stop() shuts it down and joins."""

    def __init__(self, worker: Any) -> None:
        import threading
        self.worker = worker
        self.error: Any = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.worker.run()
        except BaseException as e:  # noqa: BLE001 - reported by stop()
            self.error = e

    def stop(self) -> None:
        self.worker.shutdown()
        self.thread.join(60)
        assert not self.thread.is_alive(), "worker.run() did not return after shutdown()"
        if self.error is not None:
            raise self.error
