"""A whole parameter-server cluster as processes on this machine, over 127.0.0.1, and its one record.

--mode ps (one worker per GPU, or --cpu-workers CPU worker processes, each pinned to its own
CPUs) and --mode distributed --launch-local (--num-workers workers) both come here: one PS
process and the workers, each started as `python -m workloads.cnn_train --role ...`, each
printing its own record; the launcher sums them into the cluster's record.
"""

import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from ...common.environment import format_cpuset
from ...common.gpus import EXPECTED_ENV
from ...common.harness import Outcome, WorkloadFailed
from ...common.record import RecordError, metric, parse_result_lines
from ...common.stats import step_time_metrics
from ..devices import partition
from ..labels import own_labels
from ..training import check_planned_gpus
from .addresses import LOOPBACK, format_host_list
from .server import BAD_CONNECTIONS_PER_WORKER

FAILURE_GRACE_SECONDS = 5.0  # after one local process failed, how long the others get to stop by themselves
TERM_GRACE_SECONDS = 10.0  # after SIGTERM, how long a process gets to write its record before SIGKILL
POLL_SECONDS = 0.1

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
)


def _child_argv(args, role, task_index, threads, ps_hosts, worker_hosts, labels_json):
    argv = []
    for name in _FORWARDED_OPTIONS:
        value = getattr(args, name)
        if name == "data_dir" and value is not None:
            value = os.path.abspath(value)
        if value is not None:
            argv += [f"--{name.replace('_', '-')}", str(value)]
    argv += ["--threads", str(threads), "--labels-json", json.dumps(labels_json)]
    argv += ["--role", role, "--task-index", str(task_index)]
    argv += ["--ps-hosts", format_host_list(ps_hosts), "--worker-hosts", format_host_list(worker_hosts)]
    return [sys.executable, "-m", "workloads.cnn_train", *argv]


def _free_loopback_ports(count):
    """Ports nobody listens on now (the workers' nominal addresses; the PS gets a bound socket)."""
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


def _last_record(path):
    """The last record a child printed, or None; a line that breaks the schema counts as none."""
    with open(path, errors="replace") as handle:
        try:
            records = parse_result_lines(handle.read())
        except RecordError as error:
            print(f"{path}: {error}", file=sys.stderr)
            return None
    return records[-1] if records else None


def _tail(path, lines=15):
    with open(path, errors="replace") as handle:
        return "".join(handle.readlines()[-lines:])


class _Child:
    def __init__(self, name, argv, env, directory, cpus=None, gpu=None, pass_fds=()):
        self.name, self.argv, self.cpus, self.gpu = name, argv, cpus, gpu
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
                pass_fds=pass_fds,
                preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None,
            )
        self.returncode = None
        self.record = None

    def poll(self):
        if self.returncode is None:
            self.returncode = self.process.poll()
        return self.returncode

    def terminate(self):
        if self.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            return True
        return False

    def stop(self):
        if self.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.returncode = self.process.wait(timeout=30)
            return True
        return False

    def collect(self):
        self.record = _last_record(self.stdout_path)

    @property
    def ok(self):
        return self.returncode == 0 and self.record is not None and self.record.get("status") == "ok"

    def failure(self):
        error = (self.record or {}).get("error")
        if not error:
            last_lines = _tail(self.stderr_path, 3).strip().splitlines()
            error = last_lines[-1] if last_lines else "no output"
        return f"{self.name} (exit {self.returncode}): {error}"


def _wait_all(children, timeout):
    """Waits for every child, at most `timeout` s. Returns (failed first, stopped by the launcher).

    Once a child has failed, the others get FAILURE_GRACE_SECONDS to stop by themselves (a
    failing process tells its peers), then SIGTERM (each records itself as failed), then,
    TERM_GRACE_SECONDS later, SIGKILL. The same happens when the time limit is reached.
    """
    deadline = time.monotonic() + timeout
    failed_first, stop_at, terminated_at, terminated = [], None, None, []
    bound = math.ceil((timeout + FAILURE_GRACE_SECONDS + TERM_GRACE_SECONDS) / POLL_SECONDS) + 1
    for _ in range(bound):
        codes = [child.poll() for child in children]
        if all(code is not None for code in codes):
            break
        now = time.monotonic()
        if stop_at is None:
            failed_first = [child.name for child, code in zip(children, codes, strict=False) if code not in (None, 0)]
            if failed_first:
                stop_at = now + FAILURE_GRACE_SECONDS
            elif now >= deadline:
                stop_at = now
        if stop_at is not None and terminated_at is None and now >= stop_at:
            terminated = [child.name for child in children if child.terminate()]
            terminated_at = now
        if terminated_at is not None and now - terminated_at > TERM_GRACE_SECONDS:
            break
        time.sleep(POLL_SECONDS)
    killed = [child.name for child in children if child.stop()]
    return failed_first, sorted(set(terminated) | set(killed))


def _values(record):
    return {entry["metric"]: entry["value"] for entry in record["metrics"]}


def _aggregate(args, workers, ps):
    """One record for the whole cluster: throughput is the sum of the workers' own throughputs."""
    values = [_values(child.record) for child in workers]
    step_times = [t for child in workers for t in child.record["metadata"]["step_times"]]
    metrics = [metric("throughput", sum(v["throughput"] for v in values), "images/sec")]
    metrics += [metric(f"worker{index}_throughput", v["throughput"], "images/sec") for index, v in enumerate(values)]
    metrics += [
        metric("startup", max(v["startup"] for v in values), "s"),
        *step_time_metrics(step_times),
        metric("data_load", sum(v["data_load"] for v in values) / len(values), "s"),
        metric("data_first_batch", max(v["data_first_batch"] for v in values), "s"),
    ]
    metrics += [metric(f"worker{index}_data_load", v["data_load"], "s") for index, v in enumerate(values)]
    metrics += [
        metric("loss_first", values[0]["loss_first"], "loss"),
        metric("loss_last", values[0]["loss_last"], "loss"),
    ]
    # GPU workers: the input copies of every worker, the mean time as for data_load.
    if all("h2d_time" in v for v in values):
        metrics += [
            metric("h2d_time", sum(v["h2d_time"] for v in values) / len(values), "s"),
            metric("h2d_bytes", sum(v["h2d_bytes"] for v in values), "B"),
        ]
    # The cluster's FLOPs: every worker's, against the sum of the peaks of their own CPUs/GPUs.
    if all("achieved_flops" in v for v in values):
        metrics += [
            metric("model_flops", values[0]["model_flops"], "GFLOP/sample"),
            metric("achieved_flops", sum(v["achieved_flops"] for v in values), "GFLOP/s"),
        ]
    if all("mfu" in v for v in values):
        peak = sum(v["peak_flops"] for v in values)
        metrics += [
            metric("peak_flops", peak, "GFLOP/s"),
            metric("mfu", sum(v["achieved_flops"] for v in values) / peak, "ratio"),
        ]
    per_worker = []
    for index, (child, v) in enumerate(zip(workers, values, strict=False)):
        meta = child.record["metadata"]
        per_worker.append(
            {
                "task_index": index,
                "role": child.record["labels"].get("role"),
                "pid": meta.get("pid"),
                "cpuset": meta.get("cpuset"),
                "threads": child.record["labels"].get("threads"),
                "gpu": child.gpu,
                "throughput": v["throughput"],
                "mfu": v.get("mfu"),
                "peak_flops": v.get("peak_flops"),
                "data_load": v["data_load"],
                "data_first_batch": v["data_first_batch"],
                "elapsed": v["elapsed"],
                "step_times": meta.get("step_times"),
                "input": meta.get("input"),
                "ps_client": meta.get("ps_client"),
                "devices": meta.get("devices"),
                "h2d_time": v.get("h2d_time"),
            }
        )
    chief = workers[0].record["metadata"]
    ps_values = _values(ps.record)
    metadata = {
        "per_worker": per_worker,
        "ps": {"pid": ps.record["metadata"].get("pid"), **ps_values, **ps.record["metadata"].get("ps", {})},
        "step_times": step_times,
        "losses": chief.get("losses"),
    }
    for key in (
        "framework_version",
        "keras_version",
        "model_params",
        "onednn",
        "device",
        "tf_function_traces",
        "h2d_method",
    ):
        if key in chief:
            metadata[key] = chief[key]
    return metrics, metadata


def _planned_env(run, gpu_count):
    """A child's own plan: the number of GPUs it is handed; the launcher checks the cluster's bus ids."""
    if run.expected_gpus is None:
        return {}  # a run by hand: nothing to check
    return {EXPECTED_ENV: json.dumps({"count": gpu_count, "pci_bus_ids": None}, separators=(",", ":"))}


def launch_local(args, run):
    """The harness body of the launching process: 1 PS + args.workers workers here, one aggregate record.

    The cluster's devices are its workers' (run.devices), checked by the harness against the plan.
    """
    check_planned_gpus(args, run.expected_gpus)
    directory = tempfile.mkdtemp(prefix="cnn_train-cluster-")
    children, listener = [], None
    run.on_failure(lambda _error: [child.stop() for child in children])
    try:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind((LOOPBACK, 0))
        listener.listen(args.workers * (1 + BAD_CONNECTIONS_PER_WORKER))
        ps_hosts = [(LOOPBACK, listener.getsockname()[1])]
        worker_hosts = [(LOOPBACK, port) for port in _free_loopback_ports(args.workers)]
        cpus = sorted(os.sched_getaffinity(0))[: args.threads]
        groups = partition(cpus, args.workers)
        package_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
        base_env = dict(os.environ)
        base_env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_parent, os.environ.get("PYTHONPATH")]))
        # Labels the children set themselves (threads, role, ...) must not be forced on them.
        child_labels = {k: v for k, v in args.labels_json.items() if k not in own_labels(args, always_mode=True)}

        def launch(role, index, threads):
            return _child_argv(args, role, index, threads, ps_hosts, worker_hosts, child_labels)

        # The PS runs on CPU, on any CPU this process may use: it mostly waits.
        ps_argv = launch("ps", 0, 1) + ["--ps-listen-fd", str(listener.fileno())]
        ps_env = {**base_env, "CUDA_VISIBLE_DEVICES": "", **_planned_env(run, 0)}
        ps = _Child("ps", ps_argv, ps_env, directory, pass_fds=(listener.fileno(),))
        children.append(ps)
        listener.close()  # the PS holds it now
        listener = None
        workers = []
        for index, group in enumerate(groups):
            gpu = args.gpus[index] if args.gpus else None
            env = {
                **base_env,
                "CUDA_VISIBLE_DEVICES": gpu if gpu is not None else "",
                **_planned_env(run, 0 if gpu is None else 1),
            }
            role = "chief" if index == 0 else "worker"
            child = _Child(f"worker{index}", launch(role, index, len(group)), env, directory, set(group), gpu)
            workers.append(child)
            children.append(child)
        failed_first, stopped = _wait_all(children, args.launch_timeout)
        for child in children:
            child.collect()
        run.metadata["cluster"] = {
            "ps_hosts": format_host_list(ps_hosts),
            "worker_hosts": format_host_list(worker_hosts),
            "processes": {
                child.name: {
                    "pid": child.process.pid,
                    "exit": child.returncode,
                    "cpus": format_cpuset(child.cpus) if child.cpus else None,
                    "gpu": child.gpu,
                }
                for child in children
            },
            "launch_timeout": args.launch_timeout,
        }
        failures = [child for child in children if not child.ok]
        if failures:
            raise WorkloadFailed(_failure_summary(args, failures, failed_first, stopped))
        metrics, cluster_metadata = _aggregate(args, workers, ps)
        run.metadata.update(cluster_metadata)
        run.devices = [device for child in workers for device in child.record["metadata"].get("devices", [])]
        return Outcome(metrics)
    finally:
        if listener is not None:
            listener.close()
        shutil.rmtree(directory, ignore_errors=True)


def _failure_summary(args, failures, failed_first, stopped):
    """Why the cluster failed, the cause first; each failed child's stderr tail goes to stderr."""
    for child in failures:
        sys.stderr.write(f"--- {child.name} stderr (last lines) ---\n{_tail(child.stderr_path)}")
    # The cause comes first: a process killed by a signal, else the one seen failing first;
    # the others mostly report its consequences (peers see closed connections).
    failures.sort(key=lambda child: (not (child.returncode or 0) < 0, child.name not in failed_first))
    reasons = [child.failure() for child in failures if child.name not in stopped]
    if stopped:
        if failed_first:
            why = f"after {', '.join(failed_first)} failed"
        else:
            why = f"at the {args.launch_timeout:g}s time limit"
        reasons.append(f"stopped by the launcher {why}: {', '.join(stopped)}")
    return "; ".join(reasons)
