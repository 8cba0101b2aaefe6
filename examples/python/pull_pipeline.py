#!/usr/bin/env python3
"""pull_pipeline: takes records with kcl.PullConsumer and finishes them on a thread pool,
out of order; each record is acknowledged when its work is done, and each shard's
checkpoint follows the records finished without a gap.

    python3 pull_pipeline.py STREAM APPLICATION [--threads N] [--max N]

Ctrl-C or SIGTERM stops it gracefully: records taken are finished and acknowledged, the
checkpoints written, the leases handed back.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import threading

import kcl

done = 0
done_lock = threading.Lock()


def work(record: kcl.PulledRecord) -> None:
    """Stands for a call to another service: any thread, any order."""
    hashlib.sha256(record.data).hexdigest()
    record.ack()
    global done
    with done_lock:
        done += 1


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("stream")
    p.add_argument("app")
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--max", type=int, default=0, help="stop after this many records")
    a = p.parse_args()
    taken = 0
    with concurrent.futures.ThreadPoolExecutor(a.threads) as pool:
        with kcl.PullConsumer(stream=a.stream, app=a.app, initial_position="TRIM_HORIZON",
                              checkpoint_interval=1.0) as consumer:
            for record in consumer:  # until Ctrl-C / SIGTERM
                pool.submit(work, record)
                taken += 1
                if taken == a.max:
                    break
            pool.shutdown(wait=True)  # every record taken is finished and acknowledged
    print("finished %d records" % done)


if __name__ == "__main__":
    main()
