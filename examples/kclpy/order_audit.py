#!/usr/bin/env python3
"""order_audit: an amazon_kclpy application (version 3 interface), as written for AWS's
MultiLangDaemon; kcl-cpp runs it unchanged in one process:

    python3 -m kcl.kclpy order_audit.properties

It decodes every record, counts the records per partition key and their bytes, and
checkpoints its shard at the largest record seen every CHECKPOINT_EVERY seconds, retrying a
throttled checkpoint.
"""
import sys
import time

from amazon_kclpy import kcl
from amazon_kclpy.v3 import processor

CHECKPOINT_EVERY = 10.0
RETRIES = 5


class RecordProcessor(processor.RecordProcessorBase):
    def __init__(self):
        self.shard = None
        self.per_key = {}
        self.bytes = 0
        self.largest = None  # (sequence number as int, sub-sequence number)
        self.last_checkpoint = time.time()

    def initialize(self, initialize_input):
        self.shard = initialize_input.shard_id
        self.last_checkpoint = time.time()
        sys.stderr.write("%s: starting at %s\n" % (self.shard, initialize_input.sequence_number))

    def checkpoint(self, checkpointer, sequence_number=None, sub_sequence_number=None):
        for attempt in range(RETRIES):
            try:
                checkpointer.checkpoint(sequence_number, sub_sequence_number)
                return
            except kcl.CheckpointError as e:
                if e.value == "ShutdownException":  # the lease went to another worker
                    return
                if e.value != "ThrottlingException" or attempt == RETRIES - 1:
                    sys.stderr.write("%s: checkpoint failed: %s\n" % (self.shard, e.value))
                    return
            time.sleep(1)

    def process_records(self, process_records_input):
        for record in process_records_input.records:
            self.bytes += len(record.binary_data)
            self.per_key[record.partition_key] = self.per_key.get(record.partition_key, 0) + 1
            position = (int(record.sequence_number), record.sub_sequence_number)
            if self.largest is None or position > self.largest:
                self.largest = position
        if self.largest and time.time() - self.last_checkpoint >= CHECKPOINT_EVERY:
            self.checkpoint(process_records_input.checkpointer, str(self.largest[0]),
                            self.largest[1])
            self.last_checkpoint = time.time()

    def lease_lost(self, lease_lost_input):
        sys.stderr.write("%s: lease lost\n" % self.shard)

    def shard_ended(self, shard_ended_input):
        self.checkpoint(shard_ended_input.checkpointer)

    def shutdown_requested(self, shutdown_requested_input):
        self.checkpoint(shutdown_requested_input.checkpointer)
        sys.stderr.write("%s: %d keys, %d records, %d bytes\n" % (
            self.shard, len(self.per_key), sum(self.per_key.values()), self.bytes))


if __name__ == "__main__":
    kcl.KCLProcess(RecordProcessor()).run()
