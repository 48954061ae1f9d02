"""What the Beam pipeline needs to run on Apache Beam's DaskRunner.

`--runner=DaskRunner` is not one of the names Beam resolves by itself, so it
is mapped to the runner's class. Before the pipeline is built, the cluster
named in `--beam_pipeline_options` (`--dask_client_address` or
`--dask_scheduler_file`) is checked once, so that a wrong address, a cluster
without workers or workers that cannot import `data_prep` give one line
naming the option instead of a traceback or an endless wait; the number of
worker threads sets how many Dask partitions the pipeline is cut into.
Failures of the cluster while the job runs are turned into one line too.

Dask and distributed are imported only here and only for that runner, so the
other runners do not need them.
"""
from __future__ import annotations

import os
import sys
import time
from typing import List, Optional, Sequence, Tuple

from albert_tf.errors import UserError

DASK_RUNNER = "apache_beam.runners.dask.dask_runner.DaskRunner"
# Partitions per worker thread when --dask_npartitions is not given: more than one,
# so that a thread whose partitions hash to few keys does not idle while others work.
PARTITIONS_PER_THREAD = 2
# Seconds to reach the scheduler (and for a first worker to join it) before saying so;
# --dask_connection_timeout overrides it.
CONNECT_SECONDS = 10
# A job whose scheduler has had no worker this long fails (Dask itself would wait for one
# to join forever); the scheduler is asked every WORKER_CHECK_SECONDS.
NO_WORKER_SECONDS = 60
WORKER_CHECK_SECONDS = 2.0
_RERUN = ("outputs are written atomically (none is partial): rerun the same command once "
          "the cluster is healthy")


class ClusterError(UserError):
    """The Dask cluster cannot run the job (unreachable, no worker, or lost mid-run)."""


def is_dask_runner(runner: str) -> bool:
    return runner in ("DaskRunner", DASK_RUNNER)


def worker_environment() -> Tuple[str, str, str]:
    """(Python major.minor, apache-beam version, digest of the data_prep code it imported)
    of the process that runs it. Sent to the scheduler and the workers by reference:
    unpickling it there imports data_prep, so it also checks that they can."""
    import apache_beam
    from data_prep import beam_pipeline
    return (f"{sys.version_info[0]}.{sys.version_info[1]}", apache_beam.__version__,
            beam_pipeline.SOURCE_DIGEST)


def _dask_options(pipeline_args: Sequence[str]):
    """The DaskRunner's own options (`DaskOptions`) parsed from the pipeline arguments;
    ClusterError when dask or distributed is not installed."""
    try:
        from apache_beam.options.pipeline_options import PipelineOptions
        from apache_beam.runners.dask.dask_runner import DaskOptions
        import distributed  # noqa: F401  (the runner imports it only when it runs)
    except ImportError as error:
        raise ClusterError("--runner=DaskRunner needs dask and distributed: pip install them "
                           "at the versions of requirements-beam.txt "
                           f"({one_line(error)})") from error
    return PipelineOptions(list(pipeline_args)).view_as(DaskOptions)


def prepare(pipeline_args: Sequence[str]) -> Tuple[List[str], int]:
    """Checks the cluster of the pipeline arguments; returns the arguments (with
    `--dask_npartitions` added when neither it nor `--dask_partition_size` is given)
    and the number of partitions to spread the work over."""
    args = list(pipeline_args)
    options = _dask_options(args)
    if options.address or options.scheduler_file:  # checked even with its partitions given
        threads = _check_cluster(options)
        partitions = options.npartitions or PARTITIONS_PER_THREAD * threads
    elif options.npartitions:
        partitions = options.npartitions
    else:  # the runner starts a dask.distributed.LocalCluster on this machine
        from dask.system import CPU_COUNT
        partitions = PARTITIONS_PER_THREAD * CPU_COUNT
    if not options.npartitions and not options.partition_size:
        args.append(f"--dask_npartitions={partitions}")
    return args, partitions


def _check_cluster(options) -> int:
    """Connects to the scheduler, waits for a worker and checks that the scheduler and the
    workers import data_prep with this process's Python and Beam; returns the number of
    worker threads. ClusterError naming the option on any failure."""
    from distributed import Client

    flag = (f"--dask_client_address={options.address}" if options.address
            else f"--dask_scheduler_file={options.scheduler_file}")
    seconds = options.timeout if isinstance(options.timeout, int) else CONNECT_SECONDS
    if not options.address and not os.path.isfile(options.scheduler_file):
        # distributed would wait for the file to appear, forever
        raise ClusterError(f"{flag}: no such file (the scheduler writes it when started with "
                           "`dask scheduler --scheduler-file`)")
    try:
        client = Client(address=options.address, scheduler_file=options.scheduler_file,
                        timeout=seconds, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as error:
        raise ClusterError(f"{flag}: no Dask scheduler answered within {seconds} s "
                           f"({one_line(error)})") from error
    try:
        try:
            client.wait_for_workers(1, timeout=seconds)
        except TimeoutError as error:
            raise ClusterError(f"{flag}: no Dask worker joined the scheduler within {seconds} s;"
                               " start some with `dask worker <scheduler address>`") from error
        _check_environments(client, flag)
        return sum(client.nthreads().values())
    finally:
        client.close()


def _check_environments(client, flag: str) -> None:
    """ClusterError unless the scheduler and every worker import data_prep and run this
    process's Python, apache-beam and data_prep code: a task graph pickled here is
    unpickled there, by the scheduler too."""
    ours = worker_environment()
    try:
        found = {"scheduler": client.run_on_scheduler(worker_environment)}
        found.update(client.run(worker_environment))
    except (OSError, TimeoutError) as error:
        raise ClusterError(f"{flag}: lost the Dask scheduler while checking it "
                           f"({one_line(error)})") from error
    except Exception as error:  # noqa: BLE001 -- whatever unpickling there raised
        raise ClusterError(f"{flag}: the Dask scheduler or a worker cannot import data_prep "
                           f"({one_line(error)}); install albert-tf there or start them with "
                           "PYTHONPATH=<albert-tf checkout>") from error
    for where, theirs in sorted(found.items()):
        theirs = tuple(theirs)
        if theirs[:2] != ours[:2]:
            raise ClusterError(f"{flag}: {where} runs Python {theirs[0]} with apache-beam "
                               f"{theirs[1]}, this process Python {ours[0]} with apache-beam "
                               f"{ours[1]}; use the same versions everywhere")
        if theirs[2] != ours[2]:
            raise ClusterError(f"{flag}: {where} runs other data_prep code than this process "
                               "(started before an update, or another checkout): restart it "
                               "from the same albert-tf version")


def wait(result, poll_seconds: float = 0.2) -> None:
    """Waits for the DaskRunner's job, then closes its client. Raises the job's own error,
    or ClusterError when the cluster failed: tasks lost with their workers too often,
    the scheduler lost (Beam's DaskRunner would report such a job as done), or no worker
    left for NO_WORKER_SECONDS (Dask would wait for one forever)."""
    client, futures = result.client, list(result.futures)
    try:
        without_workers, next_check = None, time.monotonic()
        while not all(future.done() for future in futures):
            time.sleep(poll_seconds)
            if time.monotonic() >= next_check:
                without_workers = _check_workers(client, futures, without_workers)
                next_check = time.monotonic() + WORKER_CHECK_SECONDS
        for future in futures:
            _raise_unless_finished(future)
    finally:
        client.close()


def _check_workers(client, futures, without_workers: Optional[float]) -> Optional[float]:
    """Since when the scheduler has had no worker (None if it has some, or does not
    answer: the client then gives up on it and cancels the futures); ClusterError after
    NO_WORKER_SECONDS."""
    try:
        workers = len(client.nthreads())
    except (OSError, TimeoutError):
        return without_workers
    if workers:
        return None
    now = time.monotonic()
    if without_workers is not None and now - without_workers > NO_WORKER_SECONDS:
        client.cancel(futures)
        raise ClusterError(f"--runner=DaskRunner: no Dask worker left for {NO_WORKER_SECONDS} s "
                           f"(all were lost); cancelled the job; {_RERUN}")
    return now if without_workers is None else without_workers


def _raise_unless_finished(future) -> None:
    if future.status == "finished":
        return
    if future.status == "error":
        from distributed import KilledWorker
        try:
            future.result()
        except KilledWorker as error:
            raise ClusterError(f"--runner=DaskRunner: Dask lost the workers running one task "
                               f"too many times ({one_line(error)}; the scheduler's "
                               "distributed.scheduler.allowed-failures); a task that needs more "
                               f"memory than a worker has does this; {_RERUN}") from error
    raise ClusterError(f"--runner=DaskRunner: the job was {future.status} before it finished "
                       f"(the Dask scheduler was lost or restarted); {_RERUN}")


def one_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__
