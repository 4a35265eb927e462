"""One rank of a distributed cnn_train run: DistributedDataParallel (torch) or MultiWorkerMirroredStrategy
(tensorflow). Every rank trains; rank 0 gathers every rank's figures and prints the run's one record."""

import importlib
import os
import socket
import sys

from ..common.environment import format_cpuset, set_thread_env
from ..common.harness import Outcome
from ..common.record import metric
from .ranks import aggregate, rank_figures
from .settings import FRAMEWORK_BACKENDS
from .training import check_planned_gpus, discard_from_env, record_injection, run_steps, spin_from_env


class TorchRanks:
    """torch.distributed's process group from torchrun's environment (gloo on CPU, NCCL on GPU)."""

    def __init__(self, args, backend):
        from datetime import timedelta

        import torch
        import torch.distributed as dist

        self.dist = dist
        if torch.cuda.is_available():
            # Several ranks on one node (torchrun --nproc-per-node): one GPU each, by LOCAL_RANK.
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
        engine = "nccl" if torch.cuda.is_available() else "gloo"
        dist.init_process_group(engine, timeout=timedelta(seconds=args.net_timeout))
        self.engine = f"torch.distributed {engine}, DistributedDataParallel"
        self.trainer = backend.build_trainer(args, args.place.rank, args.place.world_size, distributed=True)

    def gather(self, figures):
        gathered = [None] * self.dist.get_world_size()
        self.dist.all_gather_object(gathered, figures)
        return gathered

    def close(self):
        self.dist.destroy_process_group()


class TensorFlowRanks:
    """tf.distribute.MultiWorkerMirroredStrategy from TF_CONFIG, one replica per worker."""

    def __init__(self, args, backend):
        self.tf = backend.tf
        strategy = backend.multi_worker_strategy(args)
        self.strategy = strategy
        self.engine = "tf.distribute.MultiWorkerMirroredStrategy"
        self.trainer = backend.build_trainer(args, args.place.rank, args.place.world_size, strategy)
        self.rank, self.timeout = args.place.rank, args.net_timeout

    def gather(self, figures):
        """Every worker's figures, through the strategy's own all-gather: JSON text as padded integer rows."""
        import json

        tf = self.tf
        text = json.dumps(figures).encode()
        lengths = self._all_gather(tf.constant([[len(text)]], tf.int32))
        longest = int(tf.reduce_max(lengths))
        row = list(text) + [0] * (longest - len(text))
        rows = self._all_gather(tf.constant([row], tf.int32)).numpy()
        sizes = lengths.numpy()[:, 0]
        return [json.loads(bytes(int(v) for v in rows[index, : sizes[index]])) for index in range(len(sizes))]

    def _all_gather(self, value):
        """[workers, ...]: every worker's `value` ([1, ...]) stacked in worker order."""
        local = self.strategy.experimental_distribute_values_from_function(lambda _context: value)
        return self.strategy.gather(local, axis=0)

    def close(self):
        """Wait until every worker is past the gather before this one ends (the harness ends it with os._exit).

        A collective's receiver pulls its part from the sender (RecvBuf): a worker gone at once closed its socket
        under a peer still pulling ("Socket closed" on cn over a bridge, now and then). The barrier is the
        coordination service's, which the strategy starts on the chief. Past the gather this worker owes nobody
        anything, so a failed barrier is only reported: a peer that died says so with its own exit status."""
        from tensorflow.python.eager import context  # the coordination service's barrier has no public API

        try:
            context.context().wait_at_barrier("platbench-cnn-train-gathered", int(self.timeout * 1000))
        except self.tf.errors.OpError as error:
            print(f"rank {self.rank}: the barrier after the gather failed: {error}", file=sys.stderr)


ENGINES = {"torch": TorchRanks, "tensorflow": TensorFlowRanks}


def train_rank(args, run):
    """The harness body of a rank; rank 0's record is the run's, the others print one only when they fail."""
    check_planned_gpus(args, run.expected_gpus)
    set_thread_env(args.threads)
    rank = args.place.rank
    run.metadata.update(rank=rank, world_size=args.place.world_size)
    if rank != 0:
        run.record_when_ok = False
    backend = importlib.import_module(f".{FRAMEWORK_BACKENDS[args.framework]}", __package__)
    ranks = ENGINES[args.framework](args, backend)
    trainer = ranks.trainer
    # An injected known overhead: every rank spins after its steps, or leaves the same share of them uncounted.
    spin, discard = spin_from_env(), discard_from_env()
    steps = run_steps(
        trainer.next_batch, trainer.step, args.warmup_steps, args.steps, run.timed_part, spin=spin, discard=discard
    )
    record_injection(run.metadata, steps, spin, discard)
    own = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "cpuset": format_cpuset(os.sched_getaffinity(0)),
        "threads": args.threads,
        "startup": steps.startup,
        "data_first_batch": args.data_scan_seconds + trainer.data_setup + steps.first_batch,
        "device": str(trainer.device),
    }
    per_rank = ranks.gather(rank_figures(rank, steps.step_times, steps.data_waits, own))
    ranks.close()
    metrics, metadata = aggregate(per_rank, args.batch_size, steps.discarded)
    metrics += [
        metric("startup", max(figures["startup"] for figures in per_rank), "s"),
        metric("data_first_batch", max(figures["data_first_batch"] for figures in per_rank), "s"),
        # Rank 0's loss on its own shard: the same job learns the same on every platform.
        metric("loss_first", steps.losses[0], "loss"),
        metric("loss_last", steps.losses[-1], "loss"),
    ]
    run.metadata.update(
        {**trainer.metadata(), **metadata},
        engine=ranks.engine,
        losses=[round(loss, 6) for loss in steps.losses],
        data_scan_seconds=round(args.data_scan_seconds, 6),
    )
    return Outcome(metrics + trainer.h2d_metrics(args.steps))
