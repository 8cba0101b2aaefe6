#!/usr/bin/env python3
"""producer: writes each line of standard input as one record with kcl.Producer and reports
where each went; records are KPL-aggregated and retried as needed.

    seq 1 1000 | python3 producer.py STREAM [--key-field N]

With --key-field N the N-th whitespace-separated field of a line is its partition key (the
records of one key stay in order); by default the line itself is.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import sys
from typing import Dict, List

import kcl


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("stream")
    p.add_argument("--key-field", type=int, default=0)
    a = p.parse_args()
    futures: List["concurrent.futures.Future[kcl.PutResult]"] = []
    with kcl.Producer(stream=a.stream) as producer:
        for line in sys.stdin:
            line = line.rstrip("\n")
            fields = line.split()
            key = fields[a.key_field - 1] if a.key_field and len(fields) >= a.key_field else line
            futures.append(producer.put(key or "-", line.encode()))
        producer.flush()
    failed = 0
    shards: Dict[str, int] = {}
    for f in futures:
        try:
            r = f.result()
            shards[r.shard_id] = shards.get(r.shard_id, 0) + 1
        except kcl.KclError as e:
            failed += 1
            print("failed: %s" % e, file=sys.stderr)
    for shard, n in sorted(shards.items()):
        print("%s %d" % (shard, n))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
