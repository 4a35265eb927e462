"""Where a distributed cnn_train process stands (its rank among how many), and the run's one record
made from every rank's figures. Stdlib only: read before any framework import, and by --check-args.

A rank learns its place from the environment its engine's launcher sets:
- PyTorch, torchrun (``python -m torch.distributed.run``): RANK, WORLD_SIZE, LOCAL_RANK and the
  rendezvous' MASTER_ADDR, MASTER_PORT, which ``init_process_group`` reads itself;
- TensorFlow, MultiWorkerMirroredStrategy: TF_CONFIG, ``{"cluster": {"worker": [...]}, "task":
  {"type": "worker", "index": I}}``, which the strategy reads itself.
"""

import json
from typing import NamedTuple

from ..common.record import metric
from ..common.stats import step_time_metrics

MIN_RANKS = 2  # a distributed run of one rank measures nothing a single-process run does not
TORCHRUN_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


class RankPlace(NamedTuple):
    rank: int
    world_size: int


class RankEnvError(ValueError):
    """The launcher's environment is missing or inconsistent; the message names the variable."""


def _int_var(environ, name):
    text = environ.get(name)
    try:
        return int(text)
    except (TypeError, ValueError):
        raise RankEnvError(f"{name}={text!r} is not an integer (set by torchrun)") from None


def torch_place(environ):
    """The rank torchrun gave this process, or None when torchrun did not start it."""
    if "RANK" not in environ and "WORLD_SIZE" not in environ:
        return None
    missing = [name for name in TORCHRUN_ENV if name not in environ]
    if missing:
        raise RankEnvError(f"torchrun's environment is incomplete: {', '.join(missing)} not set")
    rank, world_size = _int_var(environ, "RANK"), _int_var(environ, "WORLD_SIZE")
    return _checked(RankPlace(rank, world_size), "WORLD_SIZE", "RANK")


def tf_place(environ):
    """The worker TF_CONFIG makes this process, or None without TF_CONFIG."""
    text = environ.get("TF_CONFIG")
    if text is None:
        return None
    try:
        config = json.loads(text)
        workers, task = config["cluster"]["worker"], config["task"]
        kind, index = task["type"], task["index"]
    except (ValueError, KeyError, TypeError) as error:
        raise RankEnvError(
            f"TF_CONFIG is not {{'cluster': {{'worker': [host:port, ...]}}, 'task': {{'type': 'worker', "
            f"'index': I}}}}: {type(error).__name__}: {error}"
        ) from None
    other_jobs = sorted(set(config["cluster"]) - {"worker"})
    if kind != "worker" or other_jobs:
        raise RankEnvError(
            f"TF_CONFIG: MultiWorkerMirroredStrategy takes workers only, got task type {kind!r}"
            + (f" and jobs {', '.join(other_jobs)}" if other_jobs else "")
        )
    if not isinstance(workers, list) or not isinstance(index, int):
        raise RankEnvError("TF_CONFIG: cluster.worker must be a list and task.index an integer")
    return _checked(RankPlace(index, len(workers)), "TF_CONFIG's worker list", "TF_CONFIG's task.index")


def _checked(place, size_name, rank_name):
    if place.world_size < MIN_RANKS:
        raise RankEnvError(
            f"{size_name} gives {place.world_size} rank(s): a distributed run needs at least {MIN_RANKS}"
        )
    if not 0 <= place.rank < place.world_size:
        raise RankEnvError(f"{rank_name} {place.rank} is out of range for {place.world_size} ranks")
    return place


PLACE_READERS = {"torch": torch_place, "tensorflow": tf_place}


def rank_figures(rank, step_times, data_waits, extra):
    """What one rank sends rank 0 once its timed steps are done (plain JSON values)."""
    return {"rank": rank, "step_times": list(step_times), "data_waits": list(data_waits), **extra}


def aggregate(per_rank, batch_size, discarded=0):
    """The run's metrics and metadata from every rank's figures (rank_figures, in rank order).

    Throughput is global: every rank's images over the timed wall time, the time the slowest rank
    took for its timed steps (steps are synchronous: a step ends for all when the last one ends).
    A step's time is the slowest rank's time for it. ``discarded``: the timed steps each rank leaves out of the
    throughput (an injected discard, training.discarded_steps): their images are not counted, their time is.
    """
    steps = len(per_rank[0]["step_times"])
    if any(len(figures["step_times"]) != steps for figures in per_rank):
        raise ValueError(f"ranks timed different numbers of steps: {[len(f['step_times']) for f in per_rank]}")
    wall = max(sum(figures["step_times"]) for figures in per_rank)
    images = batch_size * (steps - discarded) * len(per_rank)
    global_steps = [max(times) for times in zip(*(figures["step_times"] for figures in per_rank), strict=True)]
    metrics = [
        metric("throughput", images / wall, "images/sec"),
        *step_time_metrics(global_steps),
        metric("data_load", sum(sum(figures["data_waits"]) for figures in per_rank) / len(per_rank), "s"),
    ]
    rounded = []
    for figures in per_rank:
        rounded.append(
            {
                **figures,
                "throughput": batch_size * (steps - discarded) / sum(figures["step_times"]),
                "step_times": [round(t, 6) for t in figures["step_times"]],
                "data_waits": [round(t, 6) for t in figures["data_waits"]],
            }
        )
    metadata = {
        "per_rank": rounded,
        "timed_wall_seconds": round(wall, 6),
        "step_times": [round(t, 6) for t in global_steps],
    }
    return metrics, metadata
