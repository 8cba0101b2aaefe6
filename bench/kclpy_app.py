#!/usr/bin/env python3
"""The amazon_kclpy application of bench/kclpy_inprocess.py: a version 3 record processor as
AWS's sample writes one (every record decoded, its sequence number compared with the
largest seen, a checkpoint at the largest every CHECKPOINT_EVERY seconds, checkpoints at
shard end and shutdown). Each batch's size is appended to the file named by BENCH_PROGRESS,
so the benchmark knows when the stream has been read.
"""
import os
import time

from amazon_kclpy import kcl
from amazon_kclpy.v3 import processor

CHECKPOINT_EVERY = 5.0
PROGRESS = os.environ.get("BENCH_PROGRESS")


class RecordProcessor(processor.RecordProcessorBase):
    def __init__(self):
        self.largest = (None, None)
        self.last_checkpoint = time.time()
        self.bytes = 0
        self.progress = None

    def initialize(self, initialize_input):
        self.shard = initialize_input.shard_id
        self.last_checkpoint = time.time()
        if PROGRESS:
            self.progress = open(PROGRESS, "a", buffering=1)

    def checkpoint(self, checkpointer, sequence_number=None, sub_sequence_number=None):
        try:
            checkpointer.checkpoint(sequence_number, sub_sequence_number)
        except kcl.CheckpointError as e:
            if e.value != "ShutdownException":
                raise

    def process_records(self, process_records_input):
        for record in process_records_input.records:
            data = record.binary_data
            self.bytes += len(data)
            seq = int(record.sequence_number)
            sub = record.sub_sequence_number
            if self.largest[0] is None or seq > self.largest[0] or \
                    (seq == self.largest[0] and sub > self.largest[1]):
                self.largest = (seq, sub)
        if time.time() - self.last_checkpoint > CHECKPOINT_EVERY:
            self.checkpoint(process_records_input.checkpointer, str(self.largest[0]),
                            self.largest[1])
            self.last_checkpoint = time.time()
        if self.progress is not None:
            self.progress.write("%d\n" % len(process_records_input.records))

    def lease_lost(self, lease_lost_input):
        pass

    def shard_ended(self, shard_ended_input):
        self.checkpoint(shard_ended_input.checkpointer)

    def shutdown_requested(self, shutdown_requested_input):
        self.checkpoint(shutdown_requested_input.checkpointer)


if __name__ == "__main__":
    kcl.KCLProcess(RecordProcessor()).run()
