"""--launch-local N: a distributed run's N ranks as processes on this machine, over 127.0.0.1.

Each rank is started the way it would be on its own instance, pinned to its share of the CPUs
(a GPU each when there are GPUs):
- torch: one torchrun agent per rank (``python -m torch.distributed.run --nnodes N
  --nproc-per-node 1``), all meeting at a c10d rendezvous on a free loopback port;
- tensorflow: one worker per rank, told its place by TF_CONFIG (every worker's loopback port).
Rank 0 prints the run's record; this process adopts it, with its own ``elapsed`` (launch to exit).
When a rank fails, the others are stopped, the run fails with that rank's own error, and no process
is left: every descendant is stopped at the end, also those a dying agent left orphaned.
"""

import contextlib
import ctypes
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid

from ..common.environment import format_cpuset
from ..common.gpus import EXPECTED_ENV
from ..common.harness import Outcome, WorkloadFailed
from ..common.record import RecordError, parse_result_lines
from .devices import partition
from .labels import own_labels
from .training import check_planned_gpus

LOOPBACK = "127.0.0.1"
FAILURE_GRACE_SECONDS = 5.0  # after one rank failed, how long the others get to stop by themselves
TERM_GRACE_SECONDS = 10.0  # after SIGTERM, how long a process gets to write its record before SIGKILL
POLL_SECONDS = 0.1
PR_SET_CHILD_SUBREAPER = 36  # prctl(2): orphaned descendants become this process's children
# torchrun's summary of a worker that a signal ended: "Signal 9 (SIGKILL) received by PID 1234".
TORCHRUN_SIGNAL = re.compile(r"Signal \d+ \((SIG[A-Z]+)\) received by PID (\d+)")

_FORWARDED_OPTIONS = (
    "framework",
    "model",
    "batch_size",
    "image_size",
    "num_classes",
    "warmup_steps",
    "steps",
    "data",
    "data_dir",
    "data_format",
    "data_workers",
    "optimizer",
    "dtype",
    "seed",
    "mode",
    "net_timeout",
    "peak_gflops",
)


def rank_argv(args, threads, labels_json):
    """`-m workloads.cnn_train ...` of one rank: the run's options and thread count, no launch."""
    argv = []
    for name in _FORWARDED_OPTIONS:
        value = getattr(args, name)
        if name == "data_dir" and value is not None:
            value = os.path.abspath(value)
        if value is not None:
            argv += [f"--{name.replace('_', '-')}", str(value)]
    argv += ["--threads", str(threads), "--labels-json", json.dumps(labels_json)]
    return ["-m", "workloads.cnn_train", *argv]


def torchrun_argv(ranks, endpoint, run_id, net_timeout):
    """One torchrun agent of an N-node job with one rank per node, as on N separate instances."""
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nnodes={ranks}",
        "--nproc-per-node=1",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint={endpoint}",
        f"--rdzv-id={run_id}",
        f"--rdzv-conf=join_timeout={int(net_timeout)}",
        "--max-restarts=0",
        "--monitor-interval=0.2",
        # The address rank 0 publishes as MASTER_ADDR: loopback, where every agent is. Without it torchrun looks up
        # the host's name, which a container without a network (cn's --network none) cannot resolve to reach.
        f"--local-addr={LOOPBACK}",
    ]


def tf_config(ports, index):
    cluster = {"worker": [f"{LOOPBACK}:{port}" for port in ports]}
    return json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})


def free_loopback_ports(count):
    """Ports nobody listens on now (bound together so they differ, then released for the ranks)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((LOOPBACK, 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _tail(path, lines=15):
    with open(path, errors="replace") as handle:
        return "".join(handle.readlines()[-lines:])


class Rank:
    """One launched process (a torchrun agent or a TensorFlow worker), in its own session, its output in files."""

    def __init__(self, name, argv, env, directory, cpus, gpu):
        self.name, self.cpus, self.gpu = name, cpus, gpu
        self.stdout_path = os.path.join(directory, f"{name}.out")
        self.stderr_path = os.path.join(directory, f"{name}.err")
        with open(self.stdout_path, "w") as out, open(self.stderr_path, "w") as err:
            # The launcher imports no framework and runs no thread, so preexec_fn is safe here.
            self.process = subprocess.Popen(
                argv,
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
                preexec_fn=lambda: os.sched_setaffinity(0, cpus),
            )
        self.returncode = None
        self.records = []

    def poll(self):
        if self.returncode is None:
            self.returncode = self.process.poll()
        return self.returncode

    def terminate(self):
        """SIGTERM: a torchrun agent passes it to its rank, a rank records itself as stopped."""
        if self.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            return True
        return False

    def collect(self):
        with open(self.stdout_path, errors="replace") as handle:
            try:
                self.records = parse_result_lines(handle.read())
            except RecordError as error:
                print(f"{self.name}: {error}", file=sys.stderr)

    @property
    def failed_record(self):
        return next((record for record in self.records if record["status"] != "ok"), None)

    def killed_by(self):
        """The signal that ended this rank, from its exit status or its torchrun agent's summary; else None."""
        if self.returncode is not None and self.returncode < 0:
            return signal.Signals(-self.returncode).name, self.process.pid
        found = TORCHRUN_SIGNAL.search(_tail(self.stderr_path, 60))
        return (found.group(1), int(found.group(2))) if found else None

    def failure(self):
        """This process's own error: its failed record's, the signal that killed it, or its last stderr line."""
        record = self.failed_record
        if record is not None:
            where = f"rank {record['metadata']['rank']}" if "rank" in record.get("metadata", {}) else self.name
            return f"{where} ({self.name}, exit {self.returncode}): {record['error']}"
        killed = self.killed_by()
        if killed is not None:
            return f"{self.name} (exit {self.returncode}): killed by {killed[0]} (pid {killed[1]})"
        last_lines = _tail(self.stderr_path, 3).strip().splitlines()
        return f"{self.name} (exit {self.returncode}): {last_lines[-1] if last_lines else 'no output'}"


def descendants(pid):
    """Every live descendant of pid, children first (from /proc's children lists)."""
    found, frontier = [], [pid]
    for _ in range(10_000):  # bounded: a process tree, not a cycle
        if not frontier:
            break
        parent = frontier.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except FileNotFoundError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{parent}/task/{task}/children") as handle:
                    children = [int(child) for child in handle.read().split()]
            except FileNotFoundError:
                continue
            found += children
            frontier += children
    return found


def _stop_every_descendant():
    """SIGKILL and reap whatever this process still has below it (torchrun's ranks run in their own sessions)."""
    for _ in range(50):  # a killed agent's rank may be reparented to us a moment later
        left = descendants(os.getpid())
        if not left:
            return
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for pid in left:
            with contextlib.suppress(ChildProcessError):  # not our child: its own parent reaps it
                os.waitpid(pid, os.WNOHANG)
        time.sleep(POLL_SECONDS)


def _wait_all(ranks, timeout):
    """Waits for every rank, at most `timeout` s. Returns (the names seen failing first, the names stopped).

    Once a rank has failed, the others get FAILURE_GRACE_SECONDS to stop by themselves (a collective
    with a dead peer fails), then SIGTERM, then, TERM_GRACE_SECONDS later, SIGKILL of everything left.
    The same happens when the time limit is reached.
    """
    deadline = time.monotonic() + timeout
    failed_first, stop_at, terminated_at, terminated = [], None, None, []
    for _ in range(int((timeout + FAILURE_GRACE_SECONDS + TERM_GRACE_SECONDS) / POLL_SECONDS) + 2):
        codes = [rank.poll() for rank in ranks]
        if all(code is not None for code in codes):
            break
        now = time.monotonic()
        if stop_at is None:
            failed_first = [rank.name for rank, code in zip(ranks, codes, strict=True) if code not in (None, 0)]
            if failed_first:
                stop_at = now + FAILURE_GRACE_SECONDS
            elif now >= deadline:
                stop_at = now
        if stop_at is not None and terminated_at is None and now >= stop_at:
            terminated = [rank.name for rank in ranks if rank.terminate()]
            terminated_at = now
        if terminated_at is not None and now - terminated_at > TERM_GRACE_SECONDS:
            break
        time.sleep(POLL_SECONDS)
    killed = [rank.name for rank in ranks if rank.poll() is None]
    _stop_every_descendant()
    for rank in ranks:
        rank.returncode = rank.process.wait(timeout=30)
    return failed_first, sorted(set(terminated) | set(killed))


def _planned_env(run, gpu_count):
    """A rank's own plan: the number of GPUs it is handed; the launcher checks the run's bus ids."""
    if run.expected_gpus is None:
        return {}  # a run by hand: nothing to check
    return {EXPECTED_ENV: json.dumps({"count": gpu_count, "pci_bus_ids": None}, separators=(",", ":"))}


def _become_subreaper():
    """Orphans below us (a rank whose torchrun agent died) become our children, so none escapes the sweep."""
    with contextlib.suppress(OSError, AttributeError):  # not Linux: the sweep still stops what it can see
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def launch_local(args, run):
    """The harness body of --launch-local N: N ranks here, and rank 0's record as this process's."""
    check_planned_gpus(args, run.expected_gpus)
    _become_subreaper()
    directory = tempfile.mkdtemp(prefix="cnn_train-ranks-")
    ranks = []
    run.on_failure(lambda _error: _stop_every_descendant())
    try:
        cpus = sorted(os.sched_getaffinity(0))
        # A CPU set per rank; with fewer CPUs than ranks (a test on one CPU) they share them all, as recorded.
        groups = partition(cpus, args.workers) if len(cpus) >= args.workers else [cpus] * args.workers
        package_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        base_env = dict(os.environ)
        base_env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_parent, os.environ.get("PYTHONPATH")]))
        for name in ("TF_CONFIG", "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
            base_env.pop(name, None)  # a rank's place comes from this launch only
        # Labels the ranks set themselves (threads, ...) must not be forced on them.
        rank_labels = {k: v for k, v in args.labels_json.items() if k not in own_labels(args, always_mode=True)}
        ports = free_loopback_ports(1 if args.framework == "torch" else args.workers)
        launch = {
            "framework": args.framework,
            "ranks": args.workers,
            "threads_per_rank": args.threads,
            "cpus_shared": len(cpus) < args.workers,
            "launch_timeout": args.launch_timeout,
        }
        if args.framework == "torch":
            launch["rendezvous"] = f"c10d {LOOPBACK}:{ports[0]}"
            prefix = torchrun_argv(args.workers, f"{LOOPBACK}:{ports[0]}", uuid.uuid4().hex[:12], args.net_timeout)
        else:
            launch["tf_workers"] = [f"{LOOPBACK}:{port}" for port in ports]
            prefix = [sys.executable]
        for index, group in enumerate(groups):
            gpu = args.gpus[index] if args.gpus else None
            env = {**base_env, "CUDA_VISIBLE_DEVICES": gpu or "", **_planned_env(run, 0 if gpu is None else 1)}
            if args.framework == "tensorflow":
                env["TF_CONFIG"] = tf_config(ports, index)
            name = f"node{index}" if args.framework == "torch" else f"rank{index}"
            argv = prefix + rank_argv(args, args.threads, rank_labels)
            ranks.append(Rank(name, argv, env, directory, set(group), gpu))
        failed_first, stopped = _wait_all(ranks, args.launch_timeout)
        for rank in ranks:
            rank.collect()
        launch["processes"] = {
            rank.name: {
                "pid": rank.process.pid,
                "exit": rank.returncode,
                "cpus": format_cpuset(rank.cpus),
                "gpu": rank.gpu,
            }
            for rank in ranks
        }
        run.metadata["launch"] = launch
        ok = [record for rank in ranks for record in rank.records if record["status"] == "ok"]
        if any(rank.returncode != 0 for rank in ranks) or len(ok) != 1:
            raise WorkloadFailed(_failure_summary(args, ranks, failed_first, stopped, len(ok)))
        return _adopt(run, ok[0])
    finally:
        _stop_every_descendant()
        shutil.rmtree(directory, ignore_errors=True)


def _adopt(run, record):
    """Rank 0's metrics (but `elapsed`: this process's own, launch to exit) and metadata become this record's."""
    metrics = [entry for entry in record["metrics"] if entry["metric"] != "elapsed"]
    own = {
        key: run.metadata[key]
        for key in ("launched_at", "launch", "pid", "cpuset", "cpus_allowed_count")
        if key in run.metadata
    }
    run.metadata.update(record["metadata"])
    run.metadata.update(own)
    per_rank = record["metadata"].get("per_rank", [])
    run.devices = [device for figures in per_rank for device in figures.get("devices", [])]
    run.metadata.pop("devices", None)
    return Outcome(metrics)


def _failure_summary(args, ranks, failed_first, stopped, ok_records):
    """Why the run failed, its cause first; each failed rank's stderr tail goes to stderr."""
    failures = [rank for rank in ranks if rank.returncode != 0]
    for rank in failures:
        sys.stderr.write(f"--- {rank.name} stderr (last lines) ---\n{_tail(rank.stderr_path)}")
    if not failures:
        return f"every rank exited 0 but {ok_records} printed a record, not 1 (rank 0 alone prints it)"
    # The cause first: a rank a signal killed, else one seen failing first; the others mostly
    # report its consequences (a collective whose peer is gone).
    failures.sort(key=lambda rank: (rank.killed_by() is None, rank.name not in failed_first))
    reasons = [rank.failure() for rank in failures if rank.name not in stopped or rank.failed_record]
    if stopped:
        why = (
            f"after {', '.join(failed_first)} failed" if failed_first else f"at the {args.launch_timeout:g}s time limit"
        )
        reasons.append(f"stopped by the launcher {why}: {', '.join(stopped)}")
    return "; ".join(reasons)
