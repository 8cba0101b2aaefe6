"""A pull consumer process for the tests: 8 threads finish records out of order; each
finished record is written to a file ("<shard> <sequence number> <data>", flushed) and then
acknowledged.

  python3 pull_child.py STREAM APP OUT
"""
from __future__ import annotations

import concurrent.futures
import os
import random
import sys
import threading
import time

import kcl


def main() -> int:
    stream, app, path = sys.argv[1:4]
    out = open(path, "a", buffering=1)
    lock = threading.Lock()

    def finish(r: kcl.PulledRecord) -> None:
        time.sleep(random.random() * 0.01)  # finish out of order
        with lock:
            out.write("%s %s %s\n" % (r.shard_id, r.sequence_number, bytes(r.data).decode()))
            out.flush()
            os.fsync(out.fileno())
        r.ack()

    pool = concurrent.futures.ThreadPoolExecutor(8)
    consumer = kcl.PullConsumer(stream=stream, app=app, initial_position="TRIM_HORIZON",
                                checkpoint_interval=0.05, max_records_per_call=50,
                                idle_time_between_calls=0.05, min_call_interval=0.02,
                                failover_time=2.0, shard_sync_interval=1.0,
                                scheduler_interval=0.1, leader_poll_interval=0.2,
                                poll_interval=0.2)
    with consumer:
        for record in consumer:
            pool.submit(finish, record)
    pool.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
