"""A small Kinesis and DynamoDB JSON client for the tests, against kinesalite and dynalite
(which check that a request is signed in form, not the signature itself)."""
from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.request
from typing import Any, Dict, List, Optional

_AUTH = ("AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/%s/aws4_request, "
         "SignedHeaders=content-type;host;x-amz-date;x-amz-target, Signature=00")


class AwsError(Exception):
    def __init__(self, status: int, body: Dict[str, Any]) -> None:
        super().__init__("%d %s" % (status, body))
        self.status = status
        self.type = str(body.get("__type", "")).split("#")[-1]


def _call(url: str, service: str, target: str, body: Dict[str, Any]) -> Dict[str, Any]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers={
        "Content-Type": "application/x-amz-json-1.1" if service == "kinesis"
        else "application/x-amz-json-1.0",
        "X-Amz-Target": target, "X-Amz-Date": "20260101T000000Z",
        "Authorization": _AUTH % service})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            data = r.read()
    except urllib.error.HTTPError as e:
        raise AwsError(e.code, json.loads(e.read() or b"{}")) from None
    return json.loads(data) if data else {}


class Kinesis:
    def __init__(self, url: str) -> None:
        self.url = url

    def call(self, op: str, body: Dict[str, Any]) -> Dict[str, Any]:
        return _call(self.url, "kinesis", "Kinesis_20131202." + op, body)

    def create_stream(self, name: str, shards: int) -> None:
        self.call("CreateStream", {"StreamName": name, "ShardCount": shards})
        self.wait_active(name)

    def wait_active(self, name: str) -> None:
        for _ in range(600):
            d = self.call("DescribeStream", {"StreamName": name})["StreamDescription"]
            if d["StreamStatus"] == "ACTIVE":
                return
            time.sleep(0.05)
        raise TimeoutError("stream %s not ACTIVE" % name)

    def shards(self, name: str) -> List[Dict[str, Any]]:
        return self.call("ListShards", {"StreamName": name})["Shards"]

    def put_records(self, name: str, records: List[tuple]) -> List[Dict[str, Any]]:
        """records: (partition_key, bytes); returns the result entries (in order)."""
        out: List[Dict[str, Any]] = []
        for i in range(0, len(records), 500):
            chunk = records[i:i + 500]
            r = self.call("PutRecords", {"StreamName": name, "Records": [
                {"PartitionKey": k, "Data": base64.b64encode(d).decode()} for k, d in chunk]})
            if r.get("FailedRecordCount"):
                raise AssertionError("PutRecords failed: %s" % r)
            out.extend(r["Records"])
        return out

    def split_shard(self, name: str, shard_id: str) -> None:
        self.call("SplitShard", {"StreamName": name, "ShardToSplit": shard_id,
                                 "NewStartingHashKey": str(2 ** 127)})
        self.wait_active(name)

    def read_all(self, name: str) -> List[Dict[str, Any]]:
        """Every record of every shard (raw, KPL aggregates not unpacked)."""
        out: List[Dict[str, Any]] = []
        for s in self.shards(name):
            it: Optional[str] = self.call("GetShardIterator", {
                "StreamName": name, "ShardId": s["ShardId"],
                "ShardIteratorType": "TRIM_HORIZON"})["ShardIterator"]
            while it:
                r = self.call("GetRecords", {"ShardIterator": it, "Limit": 10000})
                for rec in r["Records"]:
                    rec["ShardId"] = s["ShardId"]
                    out.append(rec)
                if not r["Records"] and r.get("MillisBehindLatest", 0) == 0:
                    break
                it = r.get("NextShardIterator")
        return out


class DynamoDB:
    def __init__(self, url: str) -> None:
        self.url = url

    def call(self, op: str, body: Dict[str, Any]) -> Dict[str, Any]:
        return _call(self.url, "dynamodb", "DynamoDB_20120810." + op, body)

    def leases(self, table: str) -> Dict[str, Dict[str, Any]]:
        """leaseKey -> {checkpoint, sub, owner, counter} of every lease in `table`."""
        try:
            items = self.call("Scan", {"TableName": table, "ConsistentRead": True})["Items"]
        except AwsError as e:
            if e.type == "ResourceNotFoundException":
                return {}
            raise
        out = {}
        for it in items:
            if "checkpoint" not in it:
                continue
            out[it["leaseKey"]["S"]] = {
                "checkpoint": it["checkpoint"]["S"],
                "sub": int(it.get("checkpointSubSequenceNumber", {"N": "0"})["N"]),
                "owner": it.get("leaseOwner", {}).get("S"),
                "counter": int(it.get("leaseCounter", {"N": "0"})["N"]),
            }
        return out
