"""Run a sweep: every point of a sweep file through its job, on Dask or serially.

``run_sweep`` skips the points the results file already holds as ``ok``, retries a failed
point once (``MAX_ATTEMPTS``), writes each batch of finished points as it arrives, and reports
progress through a callback. A point that raises is recorded as failed; the sweep goes on,
and its summary groups the table's failed points by the kind of error (:class:`FailureKind`).
On Dask, points travel in chunks that run about a second each (:class:`ChunkSizer`).

A point runs as its typed job (:class:`~wafersim.commands.jobs.JobCall`, parsed when the
sweep file loaded): the job's function is called with its options, and its metrics are read
by their :class:`~wafersim.sweeps.metrics.Metric` records. On Dask the job travels pickled to
a worker process, which keeps the sweep's own process safe from a point that crashes or runs
out of memory (the chunk is sent again point by point; only such a point fails).
"""

from __future__ import annotations

import functools
import gc
import logging
import math
import os
import re
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wafersim.sweeps.config import SweepConfig, SweepPoint, cli_parser
from wafersim.sweeps.heap import WORKER_ENVIRON, keep_freed_memory
from wafersim.sweeps.metrics import Metric
from wafersim.sweeps.results import PointRecord, open_results, read_records, write_records
from wafersim.wafer import __version__
from wafersim.wafer.arith import ceil_div
from wafersim.wafer.atomic import exclusive
from wafersim.wafer.errors import ConfigError, interrupt_in

MAX_ATTEMPTS = 2  # the first run and one retry
CHUNK_TARGET_S = 1.0  # a Dask task runs about this long once point times are known
MAX_CHUNK = 64  # points per task at most
CHUNKS_IN_FLIGHT_PER_WORKER = 2  # one running, one queued behind it
MIN_CHUNK_SHARE = 8  # the last chunks shrink to an eighth of a full one at the least
# Dask settings of the embedded cluster. Its background work runs in the process that also
# runs the sweep, and with Dask's defaults takes a share of a core even with the cluster idle,
# taken from the workers of a small machine. Event-loop "blocked?" ticks (default 20 ms) and
# the system monitor (500 ms) only feed warnings and the dashboard (off); the memory monitor
# (100 ms) checks each worker against its memory limit (LocalCluster's "auto"), so a point
# that runs away may now overshoot by up to a second of allocation before it is paused or
# killed. Work stealing has nothing to move: chunks are fed a couple per worker. Each
# worker's statistical profiler (a stack sample every 10 ms, for the dashboard's profile
# page) took CPU from the points, so it is off.
LOCAL_CLUSTER_CONFIG = {
    "distributed.admin.tick.interval": "1s",
    "distributed.admin.system-monitor.interval": "5s",
    "distributed.worker.memory.monitor-interval": "1s",
    "distributed.scheduler.work-stealing": False,
    "distributed.worker.profile.enabled": False,
}
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SweepProgress:
    """Where a running sweep stands, for a progress callback."""

    done: int
    failed: int
    total: int
    elapsed_s: float
    eta_s: float | None


@dataclass(frozen=True)
class FailureKind:
    """Failed points whose last errors differ in numbers at most: the first one's error, how
    many points failed so, the first point's index, and how many a rerun will retry."""

    error: str
    count: int
    first_point: int
    retryable: int


@dataclass(frozen=True)
class SweepSummary:
    """What ``run_sweep`` did: counts over the whole table and this run's throughput; the
    failed points of the whole table by kind of error, most common first."""

    out: str
    executor: str
    total: int
    ok: int
    failed: int
    skipped: int
    ran: int
    wall_s: float
    points_per_s: float | None
    failures: tuple[FailureKind, ...] = ()


Progress = Callable[[SweepProgress], None]


def run_point(point: SweepPoint, metrics: tuple[Metric, ...], attempt: int) -> PointRecord:
    """Run one point (on a worker or in-process); never raises: a failure is a record."""
    start = time.perf_counter()
    seed, values, error = point.job.options.seed, {}, ""
    try:
        result = point.job.run()
        values = {metric.name: metric.read(result) for metric in metrics}
    except Exception as exc:  # any failure of a point is data, not a crash
        if interrupted(exc):  # the user stopped the sweep: stop, resumable, not a failed point
            raise
        error = f"attempt {attempt}: {type(exc).__name__}: {exc}"
    return PointRecord(
        point=point.index,
        config=point.config_json(),
        seed=seed,
        wafersim_version=__version__,
        status="failed" if error else "ok",
        error=error,
        attempts=attempt,
        wall_s=time.perf_counter() - start,
        metrics=values,
    )


def _check_engines(sweep: SweepConfig) -> None:
    """An engine that the points name and this machine cannot run (cuda without a GPU) is
    one error before any point runs, not a failed record for every point."""
    engines = {getattr(point.job.options, "engine", "cpu") for point in sweep.points}
    if engines - {"cpu"}:
        from wafersim.fabric.engine import chunk_runner

        for engine in sorted(engines - {"cpu"}):
            chunk_runner(engine)


def run_sweep(
    sweep: SweepConfig,
    out: str | Path,
    *,
    scheduler: str | None = None,
    workers: int | None = None,
    serial: bool = False,
    progress: Progress | None = None,
) -> SweepSummary:
    """Run the points ``out`` lacks; on Dask unless ``serial`` (or Dask is not installed).

    A serial sweep runs in this process and sets its malloc thresholds for good (up to
    256 MiB of freed memory kept: :mod:`wafersim.sweeps.heap`).
    """
    start = time.perf_counter()
    _check_engines(sweep)
    with exclusive(out, "sweep"):  # one sweep a results file at a time
        previous = open_results(out, sweep)
        todo = [p for p in sweep.points if _needs_run(previous.get(p.index))]
        executor, runner = _executor(scheduler, workers, serial)
        tally = _Tally(sweep, previous, len(todo), start, progress)
        jobs = [(p, previous[p.index].attempts + 1 if p.index in previous else 1) for p in todo]
        for batch in runner(sweep, jobs) if jobs else ():
            write_records(out, sweep, [_merge(previous.get(r.point), r) for r in batch])
            tally.add(batch)
        failures = failure_kinds(read_records(out)) if tally.failed else ()
    wall_s = time.perf_counter() - start
    return SweepSummary(
        out=str(out),
        executor=executor,
        total=len(sweep.points),
        ok=tally.ok,
        failed=tally.failed,
        skipped=len(sweep.points) - len(todo),
        ran=len(todo),
        wall_s=wall_s,
        points_per_s=len(todo) / wall_s if todo else None,
        failures=failures,
    )


ATTEMPT = re.compile(r"(?:^| \| )attempt \d+: ")  # where each attempt's error starts
NUMBER = re.compile(r"\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def failure_kinds(records: Iterable[PointRecord]) -> tuple[FailureKind, ...]:
    """The failed records grouped by their last attempt's error with its numbers masked (a
    missing file, a misspelled metric and an SRAM overflow each fail many points alike, with
    other sizes): per group the first point's error and the count, most common first."""
    groups: dict[str, list[PointRecord]] = {}
    for record in sorted(records, key=lambda r: r.point):
        if record.status != "ok":
            groups.setdefault(NUMBER.sub("#", last_error(record.error)), []).append(record)
    kinds = [_kind(group) for group in groups.values()]
    return tuple(sorted(kinds, key=lambda kind: -kind.count))


def _kind(group: list[PointRecord]) -> FailureKind:
    retryable = sum(_needs_run(record) for record in group)
    return FailureKind(last_error(group[0].error), len(group), group[0].point, retryable)


def last_error(error: str) -> str:
    """The last attempt's message of a record's error (``attempt 1: ... | attempt 2: ...``)."""
    parts = ATTEMPT.split(error)
    return parts[-1] if parts[-1] else error


def _needs_run(record: PointRecord | None) -> bool:
    return record is None or (record.status != "ok" and record.attempts < MAX_ATTEMPTS)


def _merge(old: PointRecord | None, new: PointRecord) -> PointRecord:
    """A retry keeps the earlier attempt's error beside its own (or alone, if it succeeded)."""
    if old is None or not old.error:
        return new
    error = f"{old.error} | {new.error}" if new.error else old.error
    return PointRecord(**{**new.__dict__, "error": error})


class _Tally:
    """Counts over the whole table, updated per batch, reported to the progress callback."""

    def __init__(self, sweep: SweepConfig, previous: dict, todo: int, start: float, progress):
        skipped = [r for r in previous.values() if not _needs_run(r)]
        self.total, self.todo, self.ran = len(sweep.points), todo, 0
        self.ok = sum(r.status == "ok" for r in skipped)
        self.failed = len(skipped) - self.ok
        self.start, self.progress = start, progress
        self._report()

    def add(self, batch: list[PointRecord]) -> None:
        self.ran += len(batch)
        self.ok += sum(r.status == "ok" for r in batch)
        self.failed += sum(r.status != "ok" for r in batch)
        self._report()

    def _report(self) -> None:
        if self.progress is None:
            return
        elapsed = time.perf_counter() - self.start
        eta = elapsed / self.ran * (self.todo - self.ran) if self.ran else None
        done = self.ok + self.failed
        self.progress(SweepProgress(done, self.failed, self.total, elapsed, eta))


Runner = Callable[[SweepConfig, list[tuple[SweepPoint, int]]], Iterable[list[PointRecord]]]


def _executor(scheduler: str | None, workers: int | None, serial: bool) -> tuple[str, Runner]:
    if workers is not None and workers < 1:
        raise ConfigError(f"--workers={workers} must be >= 1")
    if serial:
        if scheduler or workers:
            raise ConfigError("--serial runs in-process: drop --scheduler and --workers")
        return "serial", _run_serial
    if not _have_dask():
        if scheduler or workers:
            raise ConfigError("--scheduler/--workers need Dask: pip install 'wafersim[sweep]'")
        log.warning("Dask is not installed; running the sweep serially")
        return "serial (Dask not installed)", _run_serial
    if scheduler and workers:
        raise ConfigError("--workers sizes the embedded cluster; drop it with --scheduler")
    n = workers or os.cpu_count() or 1
    name = f"dask {scheduler}" if scheduler else f"dask LocalCluster({n} workers)"
    return name, lambda sweep, jobs: _run_dask(sweep, jobs, scheduler, n)


def _have_dask() -> bool:
    try:
        import distributed  # noqa: F401
    except ImportError:
        return False
    return True


def _run_serial(sweep: SweepConfig, jobs: list[tuple[SweepPoint, int]]) -> Iterator[list]:
    """Points in order, handed on in batches of about ``CHUNK_TARGET_S`` (a write of the
    results file costs about as much as a fast point)."""
    _prepare_process(sweep.job)
    batch, start = [], time.perf_counter()
    for point, attempt in jobs:
        batch.append(run_point(point, sweep.metrics, attempt))
        if time.perf_counter() - start >= CHUNK_TARGET_S:
            yield batch
            batch, start = [], time.perf_counter()
    if batch:
        yield batch


def _run_dask(sweep: SweepConfig, jobs: list, scheduler: str | None, n: int) -> Iterator[list]:
    """Points go out in chunks, a few per worker at a time, each chunk sized so it runs for
    about ``CHUNK_TARGET_S`` at the mean point time so far: Dask's per-task cost in the
    client and scheduler (several ms) then stays small beside the points, and a crash still
    loses only the chunks in flight. A chunk whose worker died is sent again point by point,
    so only a point that kills a worker alone is recorded as failed."""
    from distributed import Client, as_completed

    if scheduler:
        try:
            client, cluster = Client(scheduler, timeout="10s"), None
        except (ValueError, OSError, TimeoutError) as error:
            message = str(error).splitlines()[0] if str(error) else type(error).__name__
            raise ConfigError(f"--scheduler {scheduler}: cannot connect: {message}") from None
    else:
        cluster = _local_cluster(n)
        client = Client(cluster)
    try:
        feed = _ChunkFeed(client, sweep, deque(jobs))
        done = as_completed()
        feed.top_up(done)
        for batch in done.batches():
            records = [r for future in batch for r in feed.finished(future)]
            feed.top_up(done)
            yield records
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


class _ChunkFeed:
    """The points still to send, the chunks in flight, and what came back."""

    def __init__(self, client: Any, sweep: SweepConfig, queue: deque) -> None:
        self.client, self.sweep, self.queue = client, sweep, queue
        self.alone: deque = deque()  # points of a lost chunk: each goes out by itself
        self.sizer = ChunkSizer()
        self.flying: dict[Any, list[tuple[SweepPoint, int]]] = {}  # future -> its points

    def top_up(self, done: Any) -> None:
        """Keep ``CHUNKS_IN_FLIGHT_PER_WORKER`` chunks per worker now connected in flight."""
        workers = max(1, sum(self.client.nthreads().values()))
        while (self.queue or self.alone) and len(self.flying) < (
            CHUNKS_IN_FLIGHT_PER_WORKER * workers
        ):
            if self.alone:
                chunk = [self.alone.popleft()]
            else:
                chunk = [self.queue.popleft() for _ in range(self._size(workers))]
            future = self.client.submit(run_points, self.sweep.job, chunk, self.sweep.metrics,
                                        pure=False)  # fmt: skip
            self.flying[future] = chunk
            done.add(future)

    def _size(self, workers: int) -> int:
        """The sizer's chunk, but no more than a share of what is left (guided
        self-scheduling): the last chunks shrink, so the workers finish together. Not below
        ``1 / MIN_CHUNK_SHARE`` of a full chunk (smaller ones would cost the client a write of
        the results file each without evening out the finish any further), nor above what is
        left."""
        full = self.sizer.size()
        share = ceil_div(len(self.queue), CHUNKS_IN_FLIGHT_PER_WORKER * workers)
        return int(max(1, min(full, len(self.queue), max(share, full // MIN_CHUNK_SHARE))))

    def finished(self, future: Any) -> list[PointRecord]:
        """The chunk's records; none if its worker died and its points go out again."""
        chunk = self.flying.pop(future)
        try:
            records = future.result()
        except Exception as exc:  # the worker, not the points, failed
            if interrupted(exc):
                raise
            if len(chunk) > 1:
                self.alone.extend(chunk)
                return []
            return [_lost(*chunk[0], exc)]
        self.sizer.add(records)
        return records


def run_points(job: str, chunk: list[tuple[SweepPoint, int]], metrics: tuple[Metric, ...]):
    """Run a chunk of (point, attempt) of ``job`` on a worker: one record per point."""
    _prepare_worker(job)
    return [run_point(point, metrics, attempt) for point, attempt in chunk]


def _prepare_process(job: str) -> None:
    """Set-up before a process runs points (cheap after the first call): malloc thresholds
    (:mod:`wafersim.sweeps.heap`), Numba's set-up (its first call in a process) and the job's
    modules, imported by building its CLI parser (a point itself is not parsed again). Those
    two landed in the first point's ``wall_s``, and the chunk sizer, fed that, sent small
    chunks for the next dozens of points."""
    from wafersim.sweeps import _numba_start  # not at import: `wafersim presets` needs no Numba

    keep_freed_memory()
    _numba_start.first_call()
    cli_parser(job)


@functools.cache
def _prepare_worker(job: str) -> None:
    """A Dask worker's set-up: the process's, then ``gc.freeze()``. The objects of the
    modules imported so far (over a thousand modules, Dask's and Numba's) leave the garbage
    collector's view: they live as long as the worker does, and a worker that kept them in
    view spent a long collection on them at exit, which every sweep waited for when closing
    its cluster."""
    _prepare_process(job)
    gc.freeze()


class ChunkSizer:
    """How many points the next chunk holds: enough to run about ``CHUNK_TARGET_S`` at the
    mean wall time of the points finished so far (one until any has), at most
    ``MAX_CHUNK``."""

    def __init__(self) -> None:
        self.points, self.wall_s = 0, 0.0

    def add(self, records: list[PointRecord]) -> None:
        timed = [r.wall_s for r in records if math.isfinite(r.wall_s)]
        self.points += len(timed)
        self.wall_s += sum(timed)

    def size(self) -> int:
        if not self.points:
            return 1
        mean = max(self.wall_s / self.points, 1e-6)
        return max(1, min(MAX_CHUNK, int(CHUNK_TARGET_S / mean)))


def _local_cluster(n: int):
    """``n`` single-threaded worker processes whose threads all share glibc's main arena
    (see :mod:`wafersim.sweeps.heap`), with little background work (``LOCAL_CLUSTER_CONFIG``)."""
    import dask
    from distributed import LocalCluster

    environ = {**dask.config.get("distributed.nanny.pre-spawn-environ"), **WORKER_ENVIRON}
    config = {**LOCAL_CLUSTER_CONFIG, "distributed.nanny.pre-spawn-environ": environ}
    with dask.config.set(config):
        return LocalCluster(
            n_workers=n,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            # no dashboard, but the scheduler still serves HTTP (dask/distributed#7207), by
            # default on port 8787: a second sweep at once warned that it was taken
            scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
            silence_logs=logging.ERROR,
        )


def _lost(point: SweepPoint, attempt: int, exc: Exception) -> PointRecord:
    """The record of a point whose worker died running it alone (killed, out of memory)."""
    return PointRecord(
        point=point.index,
        config=point.config_json(),
        seed=-1,
        wafersim_version=__version__,
        status="failed",
        error=f"attempt {attempt}: worker lost: {type(exc).__name__}: {exc}",
        attempts=attempt,
        wall_s=float("nan"),
    )


def interrupted(error: BaseException) -> bool:
    """Whether ``error`` is an interrupt in disguise: Ctrl-C landing inside Numba's code comes
    back as a SystemError whose chain holds the KeyboardInterrupt."""
    return isinstance(error, SystemError) or interrupt_in(error) is not None
