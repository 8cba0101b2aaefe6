#!/usr/bin/env python3
"""A record processor for `kcl multilang` (one process per shard) speaking the MultiLangDaemon
protocol on stdin/stdout, JSON lines: it counts records and checkpoints at most every 5 s,
the same work as bench/python_consume.py's in-process processor. Each batch's count is
appended to the file named by BENCH_PROGRESS (when set), so the benchmark knows when the
stream has been read.
"""
import json
import os
import sys
import time

CHECKPOINT_EVERY = 5.0


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def checkpoint():
    send({"action": "checkpoint", "sequenceNumber": None, "subSequenceNumber": None})
    reply = json.loads(sys.stdin.readline())
    if reply.get("action") != "checkpoint" or reply.get("error"):
        sys.stderr.write("checkpoint failed: %s\n" % reply)


def main():
    progress_path = os.environ.get("BENCH_PROGRESS")
    progress = open(progress_path, "a") if progress_path else None
    last_checkpoint = time.monotonic()
    for line in sys.stdin:
        message = json.loads(line)
        action = message["action"]
        if action == "processRecords":
            n = len(message["records"])
            if time.monotonic() - last_checkpoint >= CHECKPOINT_EVERY:
                checkpoint()
                last_checkpoint = time.monotonic()
            if progress is not None:
                progress.write("%d\n" % n)
                progress.flush()
        elif action in ("shardEnded", "shutdownRequested"):
            checkpoint()
        send({"action": "status", "responseFor": action})
    return 0


if __name__ == "__main__":
    sys.exit(main())
