"""kcl.Worker: reads a stream with the other workers of an application, one Python
RecordProcessor per shard lease held."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

from . import _kcl
from ._lifecycle import Consumer, sigterm_calls, track
from ._processor import RecordProcessor, adapter_factory
from ._stats import WorkerStats
from .errors import ConfigError


class Worker(Consumer):
    """A kcl-cpp worker in this process whose record processors are Python objects.

        worker = kcl.Worker(stream="orders", app="order-audit",
                            processor_factory=OrderProcessor,
                            initial_position="TRIM_HORIZON")
        worker.run()   # blocks; Ctrl-C or SIGTERM stop it gracefully

    ``processor_factory`` is called with no argument for each shard lease the worker takes and
    returns a kcl.RecordProcessor. Every other keyword is an option of kcl-cpp's WorkerConfig
    under its field's name (``failover_time``, ``thread_pool_size``, ``max_records_per_call``,
    ``endpoint_url``, ...; durations in seconds or as datetime.timedelta); kcl.worker_options()
    lists them. Bad options raise kcl.ConfigError naming each option and rule.
    """

    def __init__(self, stream: Optional[str] = None, app: Optional[str] = None,
                 processor_factory: Optional[Callable[[], RecordProcessor]] = None,
                 **options: Any) -> None:
        if processor_factory is None or not callable(processor_factory):
            raise ConfigError(["option 'processor_factory' is required: a callable returning "
                               "a kcl.RecordProcessor"])
        opts: Dict[str, Any] = dict(options, stream=stream, app=app)
        self._core: _kcl._Worker = _kcl._Worker(adapter_factory(processor_factory), opts)
        track(self)

    @classmethod
    def from_properties(cls, path: str, processor_factory: Callable[[], RecordProcessor],
                        **options: Any) -> "Worker":
        """A worker configured by a MultiLangDaemon properties file, read as `kcl multilang`
        reads it (streamName, applicationName, initialPositionInStream, regionName,
        failoverTimeMillis, ...; executableName is not used here), then by ``options``
        (kcl.Worker's keywords). Raises kcl.ConfigError naming the file's problems."""
        if processor_factory is None or not callable(processor_factory):
            raise ConfigError(["option 'processor_factory' is required: a callable returning "
                               "a kcl.RecordProcessor"])
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise ConfigError(["cannot read the properties file %s: %s" % (path, e)]) from e
        worker = cls.__new__(cls)
        worker._core = _kcl._Worker.from_properties(adapter_factory(processor_factory), text,
                                                    path, dict(options))
        track(worker)
        return worker

    def run(self) -> None:
        """start(), then blocks until the worker stops. Ctrl-C (KeyboardInterrupt) and SIGTERM
        begin a graceful shutdown (final checkpoints, leases handed back) and run() returns
        once it is complete. Raises a kcl.KclError when the worker stops on an error."""
        with sigterm_calls(self.begin_shutdown):
            self._core.start()
            self._core.wait()

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Waits for the worker to stop (at most `timeout` seconds); True once it has.
        SIGTERM (on the main thread) begins a graceful stop while it waits."""
        with sigterm_calls(self.begin_shutdown):
            if timeout is None:
                self._core.wait()
                return True
            return bool(self._core.wait_for(timeout))

    def stats(self) -> WorkerStats:
        """The worker's figures (kcl.WorkerStats)."""
        return WorkerStats._from_core(self._core.stats())

    def shutdown(self) -> None:
        """Graceful stop; blocks until done. Inside a processor callback use
        begin_shutdown() (shutdown() there raises FailedPreconditionError)."""
        self._core.shutdown()


def worker_options() -> List[str]:
    """The option names kcl.Worker accepts."""
    return sorted(_kcl.worker_option_names())
