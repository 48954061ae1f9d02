"""A multi-worker run that lost a worker: TensorFlow's error turned into one line naming the
lost peer and the checkpoint to resume from (errors.WorkerLost).

How a loss shows: TensorFlow's coordination service stops hearing a worker's heartbeats
(killed, crashed, frozen, cut off) for the heartbeat timeout (`--worker_timeout_seconds`) and
aborts every other worker's collectives ("The following tasks are unhealthy (stopped sending
heartbeats): /job:worker/replica:0/task:1"); or a collective's connection drops first
("Connection reset by peer"), which names nobody, so the peers are probed.
"""
from __future__ import annotations

import re
import socket
from typing import List, Optional, Tuple

import tensorflow as tf

from albert_tf.errors import WorkerLost

# A peer's connection gone (its process killed or crashed).
_CLOSED = (r"Connection reset|Socket closed|Broken pipe|connection refused|failed to connect|"
           r"Connection aborted")
# Messages of TensorFlow's collective and coordination errors when a peer is gone.
_LOSS = re.compile(rf"Collective ops is aborted|unhealthy|heartbeat|{_CLOSED}|"
                   r"coordination service|peer .* is unavailable", re.IGNORECASE)
_TASK = re.compile(r"/job:(\w+)/replica:\d+/task:(\d+)|/job:(\w+)/task:(\d+)")
_PROBE_SECONDS = 1.0


def _unhealthy_tasks(message: str) -> List[Tuple[str, int]]:
    """The (job, index) of the tasks the coordination service calls unhealthy. Other tasks a
    message names may be the ones that passed the error on, not the lost ones."""
    if "unhealthy" not in message:
        return []
    found = []
    for match in _TASK.finditer(message.split("unhealthy", 1)[1]):
        job = match.group(1) or match.group(3)
        task = (job, int(match.group(2) or match.group(4)))
        if task not in found:
            found.append(task)
    return found


def _unreachable_peers(cluster_spec, own: Tuple[str, int]) -> List[Tuple[str, int]]:
    """The peers of `own` that refuse or time out a TCP connection (a killed process's port
    refuses at once)."""
    gone = []
    for job, addresses in cluster_spec.as_dict().items():
        indexed = addresses.items() if isinstance(addresses, dict) else enumerate(addresses)
        for index, address in indexed:
            if (job, index) == own:
                continue
            host, _, port = address.rpartition(":")
            try:
                with socket.create_connection((host, int(port)), timeout=_PROBE_SECONDS):
                    pass
            except (OSError, ValueError):
                gone.append((job, index))
    return gone


def _cause(message: str) -> str:
    if "heartbeat" in message:
        return ("it stopped sending heartbeats for --worker_timeout_seconds (killed, crashed, "
                "frozen or cut off)")
    if re.search(_CLOSED, message, re.IGNORECASE):
        return "its connection closed (killed or crashed)"
    first = message.strip().splitlines()[0] if message.strip() else "collective aborted"
    return first[:200]


def describe_message(message: str, own: Tuple[str, int], cluster_spec,
                     probe: bool = True) -> Optional[str]:
    """"lost worker 1 (host:port): <cause>" when `message` (a TensorFlow error's, seen by task
    `own` of `cluster_spec`) means a lost peer, else None. Peers the message does not call
    unhealthy are found by probing their ports (`probe`); when every peer answers, the error
    is something else (a file system's dropped connection, say) and None keeps it whole."""
    if not _LOSS.search(message):
        return None
    peers = [task for task in _unhealthy_tasks(message) if task != own]
    if not peers and probe:
        peers = _unreachable_peers(cluster_spec, own)
    if not peers:
        return None

    def name(task):
        try:
            return f"{task[0]} {task[1]} ({cluster_spec.task_address(*task)})"
        except (ValueError, KeyError):
            return f"{task[0]} {task[1]}"

    return f"lost {', '.join(name(task) for task in peers)}: {_cause(message)}"


def describe(error: tf.errors.OpError, strategy: tf.distribute.Strategy) -> Optional[str]:
    """describe_message for an error of a multi-worker strategy's run (None otherwise)."""
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return None
    resolver = strategy.cluster_resolver
    return describe_message(error.message or "", (resolver.task_type, resolver.task_id),
                            resolver.cluster_spec())


def reraise(error: tf.errors.OpError, strategy: tf.distribute.Strategy,
            checkpoint_dir: Optional[str]) -> None:
    """Raises errors.WorkerLost (from `error`) naming the lost peer and the latest checkpoint
    of `checkpoint_dir` when `error` means a lost worker; returns otherwise."""
    lost = describe(error, strategy)
    if lost is None:
        return
    if checkpoint_dir is None:
        raise WorkerLost(f"{lost}. Rerun the same command on every worker to resume from the "
                         "last checkpoint") from error
    latest = tf.train.latest_checkpoint(checkpoint_dir)
    where = (f"the last checkpoint is {latest}" if latest else "no checkpoint was saved yet")
    raise WorkerLost(f"{lost}; {where}. Rerun the same command on every worker to resume "
                     "from it") from error
