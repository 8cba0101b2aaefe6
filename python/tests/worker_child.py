"""A worker process for the tests: runs kcl.Worker with a processor that appends each record
it processed to a file ("<shard> <sequence number> <data>" per line, written before the
batch's checkpoint), and events ("event <name> <shard>") to the same file.

  python3 worker_child.py STREAM APP OUT [--batch-sleep S] [--max-records N] [--worker-id ID]
                         [--failover S] [--wait [--wait-timeout S]]

Endpoints and credentials come from the environment (AWS_ENDPOINT_URL_KINESIS, ...).
"""
from __future__ import annotations

import argparse
import os
import sys
import threading
import time

import kcl

lock = threading.Lock()


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("stream")
    p.add_argument("app")
    p.add_argument("out")
    p.add_argument("--batch-sleep", type=float, default=0.0)
    p.add_argument("--max-records", type=int, default=10000)
    p.add_argument("--worker-id", default="")
    p.add_argument("--failover", type=float, default=2.0)
    p.add_argument("--wait", action="store_true", help="start() then wait(), not run()")
    p.add_argument("--wait-timeout", type=float, default=0.0,
                   help="with --wait: wait(S) in a loop until it returns True")
    a = p.parse_args()
    out = open(a.out, "a", buffering=1)

    def write(line: str) -> None:
        with lock:
            out.write(line + "\n")
            out.flush()
            os.fsync(out.fileno())

    class Writer(kcl.RecordProcessor):
        def initialize(self, input):
            self.shard = input.shard_id
            write("event initialize %s" % self.shard)

        def process_records(self, records, checkpointer):
            write("event batch %s %d" % (self.shard, len(records)))
            time.sleep(a.batch_sleep)
            for r in records:
                write("%s %s %s" % (self.shard, r.sequence_number, bytes(r.data).decode()))
            checkpointer.checkpoint()

        def lease_lost(self):
            write("event lease_lost %s" % self.shard)

        def shard_ended(self, checkpointer):
            checkpointer.checkpoint()
            write("event shard_ended %s" % self.shard)

        def shutdown_requested(self, checkpointer):
            checkpointer.checkpoint()
            write("event shutdown_requested %s" % self.shard)

    worker = kcl.Worker(stream=a.stream, app=a.app, processor_factory=Writer,
                        worker_id=a.worker_id or None, initial_position="TRIM_HORIZON",
                        max_records_per_call=a.max_records, idle_time_between_calls=0.05,
                        min_call_interval=0.02, failover_time=a.failover, shard_sync_interval=1.0,
                        parent_check_interval=0.1, scheduler_interval=0.1,
                        leader_poll_interval=0.2, poll_interval=0.2)
    write("event started")
    if a.wait:
        worker.start()
        if a.wait_timeout > 0:
            while not worker.wait(a.wait_timeout):
                pass
        else:
            worker.wait()
    else:
        worker.run()
    write("event run_returned")
    return 0


if __name__ == "__main__":
    sys.exit(main())
