#!/usr/bin/env python3
"""record_counter: reads a Kinesis stream with kcl.Worker and counts records per shard.

    python3 record_counter.py STREAM APPLICATION [--checkpoint-every SECONDS] [--from POS]

Start it several times with the same APPLICATION and the shards are shared between the
processes; stop one and the others take its shards over. Region, credentials and endpoints
come from the usual places (AWS_REGION, AWS_PROFILE, ~/.aws/..., AWS_ENDPOINT_URL for a local
emulator). Ctrl-C or SIGTERM stops it gracefully: every shard is checkpointed and its lease
handed back, so another process continues at once where this one stopped.
"""
from __future__ import annotations

import argparse
import logging
import threading
import time
from typing import Dict

import kcl

counts: Dict[str, int] = {}
counts_lock = threading.Lock()


class Counter(kcl.RecordProcessor):
    """Counts its shard's records and checkpoints at most every `every` seconds."""

    def __init__(self, every: float) -> None:
        self.every = every
        self.shard = ""
        self.last_checkpoint = time.monotonic()

    def initialize(self, input: kcl.InitializationInput) -> None:
        self.shard = input.shard_id
        logging.info("%s: starting after %s", self.shard, input.sequence_number)

    def process_records(self, records: kcl.RecordBatch,
                        checkpointer: kcl.Checkpointer) -> None:
        with counts_lock:
            counts[self.shard] = counts.get(self.shard, 0) + len(records)
        if time.monotonic() - self.last_checkpoint >= self.every:
            checkpointer.checkpoint()  # at the last record of this batch
            self.last_checkpoint = time.monotonic()

    def lease_lost(self) -> None:
        logging.info("%s: lease lost to another worker", self.shard)

    def shutdown_requested(self, checkpointer: kcl.Checkpointer) -> None:
        checkpointer.checkpoint()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("stream")
    p.add_argument("app")
    p.add_argument("--checkpoint-every", type=float, default=5.0)
    p.add_argument("--from", dest="start", default="TRIM_HORIZON",
                   choices=["TRIM_HORIZON", "LATEST"])
    a = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    worker = kcl.Worker(stream=a.stream, app=a.app,
                        processor_factory=lambda: Counter(a.checkpoint_every),
                        initial_position=a.start)
    worker.run()  # until Ctrl-C / SIGTERM
    stats: kcl.WorkerStats = worker.stats()
    logging.info("delivered %d records; %d processor failures, %d dead-lettered",
                 stats.records_delivered, stats.processor_failures, stats.records_dead_lettered)
    with counts_lock:
        for shard, n in sorted(counts.items()):
            print("%s %d" % (shard, n))
        print("total %d" % sum(counts.values()))


if __name__ == "__main__":
    main()
