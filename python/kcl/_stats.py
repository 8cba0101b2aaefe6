"""Typed figures of kcl.Worker.stats(), kcl.PullConsumer.stats() and kcl.Producer.stats():
frozen dataclasses carrying every field of the C++ stats structs (include/kcl/worker.h
WorkerStats, pull_consumer.h PullStats, producer.h ProducerStats)."""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Mapping, Tuple, Type, TypeVar

T = TypeVar("T")


def _from_mapping(cls: Type[T], d: Mapping[str, Any]) -> T:
    return cls(**{f.name: d[f.name] for f in fields(cls)})


@dataclass(frozen=True)
class FailingShard:
    """A shard whose last consumer ended in failure (and none delivered since)."""
    shard_id: str
    cause: str
    consecutive_failures: int
    records_delivered: int


@dataclass(frozen=True)
class WorkerStats:
    """kcl.Worker.stats(): leases held, consumers running, records delivered to processors
    (a batch counts once its callback returned), processor failures, KPL aggregates that
    did not parse, records set aside by the dead-letter policy, and the failing shards."""
    leases_held: int
    consumers: int
    records_delivered: int
    processor_failures: int
    corrupt_aggregates: int
    records_dead_lettered: int
    failing_shards: Tuple[FailingShard, ...]

    @classmethod
    def _from_core(cls, d: Mapping[str, Any]) -> "WorkerStats":
        values = dict(d)
        values["failing_shards"] = tuple(_from_mapping(FailingShard, f)
                                         for f in d["failing_shards"])
        return _from_mapping(cls, values)


@dataclass(frozen=True)
class PullStats:
    """kcl.PullConsumer.stats(): shards handing records on, records buffered (read, not
    taken), unacked (taken, not acknowledged), acked since start, stuck records reported and
    watermark checkpoints written."""
    shards: int
    buffered: int
    unacked: int
    acked: int
    stuck_records: int
    checkpoints: int

    @classmethod
    def _from_core(cls, d: Mapping[str, Any]) -> "PullStats":
        return _from_mapping(cls, d)


@dataclass(frozen=True)
class ProducerStats:
    """kcl.Producer.stats(): records put, succeeded, failed and retried; PutRecords calls and
    the Kinesis records they carried (aggregates count once); throttling answers; shard map
    refreshes; records and bytes buffered; calls in flight."""
    records_put: int
    records_succeeded: int
    records_failed: int
    records_retried: int
    put_records_calls: int
    kinesis_records_sent: int
    throttled: int
    shard_map_refreshes: int
    buffered_records: int
    buffered_bytes: int
    in_flight_calls: int

    @classmethod
    def _from_core(cls, d: Mapping[str, Any]) -> "ProducerStats":
        return _from_mapping(cls, d)
