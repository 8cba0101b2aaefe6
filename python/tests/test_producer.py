"""kcl.Producer from Python: futures and asyncio, aggregation read back by kcl-cpp's own
consumer (`kcl tail`), partial failures of PutRecords answered by the service, bad records."""
from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List

import pytest

import kcl


def producer_options(emulators, url=None) -> Dict[str, Any]:
    return dict(region="us-east-1", access_key_id="test", secret_access_key="test",
                kinesis_endpoint_url=url or emulators.kinesis_url, linger=0.02,
                aws_base_delay=0.01, aws_max_backoff=0.05)


def tail(emulators, stream: str) -> List[Dict[str, Any]]:
    """Every record of the stream as kcl-cpp's consumer reads it (KPL aggregates split)."""
    kcl_cli = os.environ.get("KCL_CLI", os.path.join(
        os.path.dirname(__file__), "../../build/release/tools/kcl/kcl"))
    out = subprocess.run([kcl_cli, "tail", "--stream", stream, "--stop-at-end"],
                         env=emulators.env(), capture_output=True, text=True, timeout=120,
                         check=True).stdout
    return [json.loads(line) for line in out.splitlines()]


def test_aggregated_records_are_read_back_by_the_cpp_consumer(emulators, names):
    stream = names("s")
    emulators.kinesis.create_stream(stream, 2)
    with kcl.Producer(stream=stream, **producer_options(emulators)) as producer:
        futures = [producer.put("key-%d" % (i % 7), b"value-%05d" % i) for i in range(2000)]
        futures.append(producer.put("text", "é unicode"))
        producer.flush(timeout=60)
        results = [f.result(timeout=0) for f in futures]
        stats = producer.stats()
    assert all(isinstance(r, kcl.PutResult) for r in results)
    assert any(r.aggregated and r.sub_sequence_number > 0 for r in results)
    assert stats.records_succeeded == 2001
    assert stats.kinesis_records_sent < 200, "small records share aggregates"
    read = tail(emulators, stream)
    got = {(r["sequenceNumber"], r["subSequenceNumber"]): base64.b64decode(r["data"])
           for r in read}
    assert len(read) == 2001
    for i, r in enumerate(results[:2000]):
        assert got[(r.sequence_number, r.sub_sequence_number)] == b"value-%05d" % i
    last = results[2000]
    assert got[(last.sequence_number, last.sub_sequence_number)] == "é unicode".encode()
    # Per key, in put() order.
    by_key: Dict[str, List[bytes]] = {}
    for r in read:
        by_key.setdefault(r["partitionKey"], []).append(base64.b64decode(r["data"]))
    assert by_key["key-3"] == [b"value-%05d" % i for i in range(2000) if i % 7 == 3]


class PartialFailures:
    """A proxy before kinesalite whose PutRecords answers fail every third record
    (ProvisionedThroughputExceededException, the record not written) for the first calls."""

    def __init__(self, target: str, failing_calls: int) -> None:
        self.target = target
        self.failing_calls = failing_calls
        self.calls = 0
        self.failed = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                status, answer = proxy.handle(self.headers.get("X-Amz-Target", ""), body,
                                              dict(self.headers))
                self.send_response(status)
                self.send_header("Content-Type", "application/x-amz-json-1.1")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def forward(self, body: bytes, headers: Dict[str, str]) -> tuple:
        headers = {k: v for k, v in headers.items() if k.lower() not in ("host", "content-length")}
        req = urllib.request.Request(self.target, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def handle(self, target: str, body: bytes, headers: Dict[str, str]) -> tuple:
        if not target.endswith(".PutRecords") or self.calls >= self.failing_calls:
            return self.forward(body, headers)
        self.calls += 1
        request = json.loads(body)
        records = request["Records"]
        kept = [r for i, r in enumerate(records) if i % 3 != 1]
        status, answer = self.forward(json.dumps(dict(request, Records=kept)).encode(), headers)
        if status != 200:
            return status, answer
        written = iter(json.loads(answer)["Records"])
        entries = []
        for i in range(len(records)):
            if i % 3 == 1:
                self.failed += 1
                entries.append({"ErrorCode": "ProvisionedThroughputExceededException",
                                "ErrorMessage": "Rate exceeded for shard"})
            else:
                entries.append(next(written))
        failed = sum(1 for e in entries if "ErrorCode" in e)
        return 200, json.dumps({"FailedRecordCount": failed, "Records": entries}).encode()

    def close(self) -> None:
        self.server.shutdown()


def test_partial_failures_are_retried_and_every_record_written_once(emulators, names):
    stream = names("s")
    emulators.kinesis.create_stream(stream, 2)
    proxy = PartialFailures(emulators.kinesis_url, failing_calls=4)
    try:
        producer = kcl.Producer(stream=stream, aggregate=False,
                                **producer_options(emulators, proxy.url))
        futures = [producer.put("k%d" % i, b"p%04d" % i) for i in range(300)]
        producer.flush(timeout=60)
        results = [f.result(timeout=0) for f in futures]
        stats = producer.stats()
        producer.shutdown()
    finally:
        proxy.close()
    assert proxy.failed > 0
    assert stats.records_retried >= proxy.failed
    assert any(r.attempts > 1 for r in results)
    read = tail(emulators, stream)
    assert sorted(base64.b64decode(r["data"]) for r in read) == [b"p%04d" % i for i in range(300)]


def test_bad_records_fail_alone_with_typed_errors(emulators, names):
    stream = names("s")
    emulators.kinesis.create_stream(stream, 1)
    producer = kcl.Producer(stream=stream, **producer_options(emulators))
    good = producer.put("fine", b"x")
    empty_key = producer.put("", b"x")
    too_big = producer.put("big", b"x" * (1024 * 1024 + 1))
    bad_hash = producer.put("k", b"x", explicit_hash_key="not-a-number")
    producer.flush(timeout=30)
    assert good.result().sequence_number
    for f in (empty_key, too_big, bad_hash):
        with pytest.raises(kcl.InvalidArgumentError):
            f.result()
    with pytest.raises(TypeError):
        producer.put("k", 42)
    with pytest.raises(TypeError, match="partition_key must be a str"):
        producer.put(b"k", b"x")
    producer.shutdown()
    with pytest.raises(kcl.CancelledError):
        producer.put("late", b"x").result(timeout=5)


def test_put_async(emulators, names):
    stream = names("s")
    emulators.kinesis.create_stream(stream, 1)

    async def main() -> List[kcl.PutResult]:
        with kcl.Producer(stream=stream, **producer_options(emulators)) as producer:
            return await asyncio.gather(*(producer.put_async("k", b"%d" % i) for i in range(50)))

    results = asyncio.run(main())
    assert len({(r.sequence_number, r.sub_sequence_number) for r in results}) == 50


def test_without_positions_a_record_is_written_with_an_empty_position(emulators, names):
    stream = names("s")
    emulators.kinesis.create_stream(stream, 1)
    with kcl.Producer(stream=stream, report_positions=False, aggregate=False,
                      **producer_options(emulators)) as producer:
        results = [f.result(timeout=30) for f in [producer.put("k", b"%d" % i) for i in range(5)]]
    assert [(r.shard_id, r.sequence_number) for r in results] == [("", "")] * 5
    with pytest.raises(kcl.ConfigError, match="report_positions"):
        kcl.Producer(stream=stream, report_positions="no", **producer_options(emulators))


def test_a_stream_that_does_not_exist(emulators):
    with pytest.raises(kcl.NotFoundError, match="no-such-stream"):
        kcl.Producer(stream="no-such-stream", **producer_options(emulators))
    with pytest.raises(kcl.ConfigError) as e:
        kcl.Producer(stream="s", linger=-1, max_attempts=0, aggregate="yes")
    assert "option 'aggregate' must be True or False, not str" in e.value.problems
    assert any("max_attempts" in p for p in e.value.problems), e.value.problems
