"""Bad options: each problem names the option and the rule, all problems at once."""
from __future__ import annotations

import datetime

import pytest

import kcl


class Nothing(kcl.RecordProcessor):
    def process_records(self, records, checkpointer):
        pass


def problems(**kwargs):
    with pytest.raises(kcl.ConfigError) as e:
        kcl.Worker(**kwargs)
    assert isinstance(e.value, ValueError) and isinstance(e.value, kcl.KclError)
    return e.value.problems


def test_each_bad_option_is_named_with_its_rule():
    p = problems(stream="s", app="app", processor_factory=Nothing, thread_pool_size=0,
                 max_leases_to_steal_at_once=0, max_records_per_call=20000)
    assert any("thread_pool_size is 0; it must be between 1 and 256" in x for x in p), p
    assert any("max_leases_to_steal_at_once" in x for x in p), p
    assert any("max_records_per_call" in x and "10000" in x for x in p), p
    assert len(p) == 3, p


def test_the_shards_read_rate_is_an_option():
    p = problems(stream="s", app="app", processor_factory=Nothing, max_read_bytes_per_second=100)
    assert p == ["max_read_bytes_per_second is 100; it must be 0 (no pacing by bytes) or at "
                 "least 1024"], p


def test_unknown_options_and_wrong_types_are_named():
    p = problems(stream="s", app="app", processor_factory=Nothing, failover_tiem=3,
                 thread_pool_size="4", verify_tls=1, initial_position="OLDEST",
                 on_processor_error="ignore", failure_backoff_base="1s")
    assert "unknown option 'failover_tiem'" in p
    assert "option 'thread_pool_size' must be an int, not str" in p
    assert "option 'verify_tls' must be True or False, not int" in p
    assert any(x.startswith("option 'initial_position' is \"OLDEST\"; it must be one of")
               for x in p), p
    assert any("'on_processor_error' is \"ignore\"; it must be one of dead_letter, retry, "
               "skip" in x for x in p), p
    assert any(x.startswith("option 'failure_backoff_base' must be seconds") for x in p), p


def test_required_options():
    p = problems(stream="s", processor_factory=Nothing)
    assert any("application_name" in x for x in p), p
    p = problems(app="app", processor_factory=Nothing)
    assert any("stream_name" in x for x in p), p
    assert problems(stream="s", app="app") == [
        "option 'processor_factory' is required: a callable returning a kcl.RecordProcessor"]


def test_durations_take_seconds_or_timedelta_and_positions_take_datetimes():
    naive = datetime.datetime(2026, 1, 1)
    p = problems(stream="s", app="app", processor_factory=Nothing, initial_position=naive,
                 failover_time=datetime.timedelta(milliseconds=5))
    assert any("initial_position" in x and "timezone-aware" in x for x in p), p
    assert any("failover_time is 5 ms" in x for x in p), p
    # Valid values make a worker (nothing starts before start()/run()).
    aware = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    kcl.Worker(stream="s", app="app", processor_factory=Nothing, initial_position=aware,
               failover_time=datetime.timedelta(seconds=20), thread_pool_size=2,
               streams=None)


def test_option_names_are_listed():
    names = kcl.worker_options()
    for n in ("stream", "app", "failover_time", "thread_pool_size", "endpoint_url",
              "http_address", "on_processor_error"):
        assert n in names


def test_every_option_of_the_table_is_a_keyword():
    # Made from the C++ table (kcl/worker_options.h): the options the table gained reach
    # Python without a line of their own, typed as the table says.
    names = kcl.worker_options()
    for n in ("idle_poll_interval", "leader_idle_poll_interval", "kinesis_wire", "metrics_level",
              "metrics_shard_id_dimension", "metrics_worker_identifier_dimension",
              "metrics_max_series"):
        assert n in names, n
    assert "kinesis_wire" in kcl.producer_options()
    kcl.Worker(stream="s", app="app", processor_factory=Nothing, kinesis_wire="cbor",
               metrics_level="summary", metrics_max_series=500, idle_poll_interval=6,
               metrics_shard_id_dimension=False)
    p = problems(stream="s", app="app", processor_factory=Nothing, kinesis_wire="xml",
                 metrics_max_series=5, metrics_shard_id_dimension="no")
    assert "option 'kinesis_wire' is \"xml\"; it must be one of auto, cbor, json" in p, p
    assert "option 'metrics_shard_id_dimension' must be True or False, not str" in p, p
    assert any(x.startswith("cloudwatch.max_series is 5") for x in p), p


def test_import_kcl_leaves_asyncio_alone_until_cancelled_error_is_used():
    """`import kcl` does not import asyncio (a third of its cost); kcl.CancelledError, made at
    its first use, is one class that is both asyncio's and concurrent.futures' CancelledError."""
    import subprocess
    import sys
    code = (
        "import sys, kcl, kcl.kclpy\n"
        "assert 'asyncio' not in sys.modules, 'import kcl imported asyncio'\n"
        "e = kcl.errors._from_status('CANCELLED', 'stopped', None)\n"
        "import asyncio, concurrent.futures\n"
        "assert type(e) is kcl.CancelledError is kcl.errors.CancelledError\n"
        "assert isinstance(e, asyncio.CancelledError)\n"
        "assert isinstance(e, concurrent.futures.CancelledError)\n"
        "assert isinstance(e, kcl.KclError) and e.code == 'CANCELLED'\n"
        "from kcl import CancelledError\n"
        "assert CancelledError is type(e)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
