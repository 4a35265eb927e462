"""Parameter-server training: one PS process holds the variables, workers push gradients and pull them.

Why not tf.distribute.experimental.ParameterServerStrategy: Keras 3 does not support parameter
server training ("Parameter server training is not supported in Keras 3", keras-team/keras#18624;
the Keras 3 optimizer's variables lack the aggregation PSS needs), and PSS would leave the
workers passive (a single coordinator dispatches every step), so no worker could time its
own steps. This is the same variable update as tf_cnn_benchmarks' `--variable_update=
parameter_server` with `--cross_replica_sync` (its default), written out explicitly, the same
for TensorFlow and PyTorch:

- the PS (no framework, numpy only) holds the trainable variables as one flat float32 vector
  and the SGD momentum state; it starts from the chief's (worker 0's) initial values;
- each step, every worker computes the gradients of its own batch locally and sends them
  (GRAD); once all N have arrived the PS averages them, applies SGD with momentum
  (v = m v + g; w -= lr v, which is Keras' and torch's SGD for a constant lr), and sends the
  new variables to every worker (PARM); the worker's timed step includes this exchange;
- batch-norm moving statistics are not trained by gradients and stay local to each worker.

Transport: one TCP connection per worker to the PS, length-prefixed messages. Workers only
dial out; their host:port entries name the cluster's members and their number (as in
tf_cnn_benchmarks' --worker_hosts). Every wait is bounded by --net-timeout, every loop by a
count; a failing process sends FAIL so that the others stop at once instead of timing out.

`launch_local` runs a whole cluster on this machine over 127.0.0.1: --mode ps (one worker
per GPU, or --cpu-workers CPU worker processes, each pinned to its own CPUs) and
--mode distributed --launch-local (--num-workers workers); it prints one aggregate record.
"""

import contextlib
import json
import math
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import traceback

from ..common import RESULT_PREFIX, emit_record, format_cpuset, metric, process_elapsed, step_time_metrics
from .settings import SGD_LEARNING_RATE, SGD_MOMENTUM

WORKLOAD = "cnn_train"
LOOPBACK = "127.0.0.1"
HEADER = struct.Struct("!4sIQ")  # kind, step, payload bytes
HELLO, PARAMS, GRADIENTS, DONE, FAIL = b"HELO", b"PARM", b"GRAD", b"DONE", b"FAIL"
MAX_CONTROL_BYTES = 1 << 20  # JSON and error messages
CONNECT_RETRY_SECONDS = 0.2
CONNECT_ATTEMPT_SECONDS = 10.0
BAD_CONNECTIONS_PER_WORKER = 4  # stray or malformed connections the PS tolerates before giving up
FAILURE_GRACE_SECONDS = 5.0  # after one local process failed, how long the others get to stop by themselves
TERM_GRACE_SECONDS = 10.0  # after SIGTERM, how long a process gets to write its record before SIGKILL
POLL_SECONDS = 0.1
FAIL_DRAIN_SECONDS = 2.0
FAIL_DRAIN_CHUNKS = 1024  # of 64 kB
_HOSTNAME = re.compile(r"^[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_])?$")
EXPECTED_HOSTS = "a comma-separated list of host:port, e.g. 127.0.0.1:2222,127.0.0.1:2223"


class AddressError(ValueError):
    pass


class ProtocolError(ConnectionError):
    pass


class RemoteFailure(RuntimeError):
    """Another process of the cluster failed and said why."""


# ------------------------------------------------------------------------------------ addresses


def parse_host_list(text):
    """'h1:p1,h2:p2' -> [(h1, p1), (h2, p2)]; IPv6 hosts in brackets; AddressError says what was expected."""

    def fail(reason):
        raise AddressError(f"expected {EXPECTED_HOSTS}; got {text!r}: {reason}")

    addresses = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            fail("empty entry")
        host, sep, port_text = item.rpartition(":")
        if not sep or not host:
            fail(f"{item!r} is not host:port")
        if host.startswith("[") and host.endswith("]"):
            try:
                socket.inet_pton(socket.AF_INET6, host[1:-1])
            except OSError:
                fail(f"{host!r} is not an IPv6 address")
            host = host[1:-1]
        elif not _HOSTNAME.match(host):
            fail(f"{host!r} is not a host name or IPv4 address")
        if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
            fail(f"port {port_text!r} of {item!r} is not a number from 1 to 65535")
        address = (host, int(port_text))
        if address in addresses:
            fail(f"{item} is listed twice")
        addresses.append(address)
    return addresses


def format_address(address):
    host, port = address
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def format_host_list(addresses):
    return ",".join(map(format_address, addresses))


# ------------------------------------------------------------------------------------- devices


def visible_gpus():
    """CUDA device ids this process may use, as CUDA_VISIBLE_DEVICES entries; no framework imported.

    Counts the NVIDIA device nodes (/dev/nvidiaN: inside a container only the GPUs given to it),
    narrowed by CUDA_VISIBLE_DEVICES when set. Best effort: [] when the driver exposes none.
    """
    try:
        nodes = [name for name in os.listdir("/dev") if re.fullmatch(r"nvidia\d+", name)]
    except OSError:
        nodes = []
    wanted = os.environ.get("CUDA_VISIBLE_DEVICES")
    if wanted is None:
        return [str(index) for index in range(len(nodes))]
    ids = []
    for entry in (part.strip() for part in wanted.split(",")):
        if not entry or entry.startswith("-"):
            break  # CUDA stops at the first invalid entry
        ids.append(entry)
    return ids[: len(nodes)]


def partition(cpus, groups):
    """Splits sorted cpus into `groups` contiguous groups whose sizes differ by at most one."""
    size, extra = divmod(len(cpus), groups)
    parts, start = [], 0
    for index in range(groups):
        end = start + size + (1 if index < extra else 0)
        parts.append(cpus[start:end])
        start = end
    return parts


# ------------------------------------------------------------------------------------ messages


class Channel:
    """One TCP connection carrying length-prefixed messages; every wait bounded by `timeout`."""

    def __init__(self, sock, timeout):
        sock.settimeout(timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock, self.timeout = sock, timeout
        self.bytes_sent = self.bytes_received = 0

    def send(self, kind, step, payload=b""):
        view = memoryview(payload).cast("B")
        self.sock.sendall(HEADER.pack(kind, step, view.nbytes))
        if view.nbytes:
            self.sock.sendall(view)
        self.bytes_sent += HEADER.size + view.nbytes

    def send_json(self, kind, step, value):
        self.send(kind, step, json.dumps(value).encode())

    def _receive_into(self, view, deadline):
        received = 0
        while received < view.nbytes:  # each pass receives at least one byte, or raises
            if time.monotonic() > deadline:
                raise TimeoutError(f"no complete message within {self.timeout:g}s")
            count = self.sock.recv_into(view[received:])
            if count == 0:
                raise ProtocolError("the peer closed the connection")
            received += count
        self.bytes_received += view.nbytes

    def receive(self, kinds, step=None, into=None):
        """(kind, step, payload): payload is bytes, or `into` (a numpy array) filled in place."""
        deadline = time.monotonic() + self.timeout
        header = bytearray(HEADER.size)
        self._receive_into(memoryview(header), deadline)
        kind, got_step, length = HEADER.unpack(header)
        if kind == FAIL and length <= MAX_CONTROL_BYTES:
            text = bytearray(length)
            self._receive_into(memoryview(text), deadline)
            raise RemoteFailure(text.decode(errors="replace"))
        if kind not in kinds:
            raise ProtocolError(f"expected {b'/'.join(kinds).decode()}, got {kind!r}")
        if step is not None and got_step != step:
            raise ProtocolError(f"expected step {step}, got step {got_step}")
        if into is not None:
            if length != into.nbytes:
                raise ProtocolError(f"expected {into.nbytes} bytes of {kind.decode()}, got {length}")
            self._receive_into(memoryview(into).cast("B"), deadline)
            return kind, got_step, into
        if length > MAX_CONTROL_BYTES:
            raise ProtocolError(f"{kind.decode()} message of {length} bytes is too large")
        payload = bytearray(length)
        self._receive_into(memoryview(payload), deadline)
        return kind, got_step, bytes(payload)

    def receive_json(self, kinds, step=None):
        kind, got_step, payload = self.receive(kinds, step)
        try:
            return kind, json.loads(payload)
        except ValueError:
            raise ProtocolError(f"{kind.decode()} message is not JSON") from None

    def fail(self, message):
        """Best effort: tell the peer why this process stops.

        Then half-close and drain what the peer still sends (bounded): closing a socket with
        unread data makes the kernel send a reset, and the peer would see "connection reset"
        instead of the reason.
        """
        try:
            self.sock.settimeout(FAIL_DRAIN_SECONDS)
            self.send(FAIL, 0, message.encode()[:MAX_CONTROL_BYTES])
            self.sock.shutdown(socket.SHUT_WR)
            deadline = time.monotonic() + FAIL_DRAIN_SECONDS
            for _ in range(FAIL_DRAIN_CHUNKS):
                if time.monotonic() > deadline or not self.sock.recv(1 << 16):
                    break
        except OSError:
            pass

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def _cluster_config(args):
    """What every member of one cluster must agree on."""
    return {
        "framework": args.framework,
        "model": args.model,
        "batch_size": args.batch_size,
        "image_size": args.image_size,
        "num_classes": args.num_classes,
        "total_steps": args.warmup_steps + args.steps,
        "workers": len(args.worker_hosts),
    }


def connect(address, timeout):
    """A Channel to `address`, retried (the PS may start later) for at most `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last_error = None
    for _ in range(max(1, math.ceil(timeout / CONNECT_RETRY_SECONDS))):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        try:
            sock = socket.create_connection(address, timeout=min(remaining, CONNECT_ATTEMPT_SECONDS))
            return Channel(sock, timeout)
        except OSError as error:
            last_error = error
            time.sleep(min(CONNECT_RETRY_SECONDS, max(0.0, deadline - time.monotonic())))
    raise ConnectionError(
        f"could not reach the parameter server at {format_address(address)} within {timeout:g}s: {last_error}"
    )


# ------------------------------------------------------------------------------ worker side


class PsClient:
    """A worker's link to the PS: step(batch) = local gradients -> PS -> new variables."""

    def __init__(self, args, trainer):
        import numpy as np

        self.trainer, self.args = trainer, args
        started = time.perf_counter()
        self.channel = connect(args.ps_hosts[0], args.net_timeout)
        params = np.ascontiguousarray(trainer.get_params(), dtype=np.float32)
        hello = {**_cluster_config(args), "task_index": args.task_index, "role": args.role, "params": int(params.size)}
        self.channel.send_json(HELLO, 0, hello)
        if args.role == "chief":
            self.channel.send(PARAMS, 0, params)  # the PS starts from the chief's initial values
        self.params = np.empty_like(params)
        # Returns once every worker has joined: all start step 0 together, from the same values.
        self.channel.receive((PARAMS,), step=0, into=self.params)
        trainer.set_params(self.params)
        self.join_seconds = time.perf_counter() - started
        self.step_index = 0
        self.exchange_seconds = 0.0

    def step(self, batch):
        loss, gradients = self.trainer.gradients(batch)
        exchange_started = time.perf_counter()
        self.channel.send(GRADIENTS, self.step_index, gradients)
        self.step_index += 1
        self.channel.receive((PARAMS,), step=self.step_index, into=self.params)
        self.exchange_seconds += time.perf_counter() - exchange_started
        self.trainer.set_params(self.params)
        return loss

    def finish(self):
        self.channel.send_json(DONE, self.step_index, {"task_index": self.args.task_index})
        self.channel.close()

    def abort(self, message):
        self.channel.fail(f"{self.args.role} {self.args.task_index}: {message}")
        self.channel.close()

    def metadata(self):
        return {
            "ps": format_address(self.args.ps_hosts[0]),
            "join_seconds": round(self.join_seconds, 6),
            "exchange_seconds": round(self.exchange_seconds, 6),
            "bytes_sent": self.channel.bytes_sent,
            "bytes_received": self.channel.bytes_received,
            "params": int(self.params.size),
        }


# ---------------------------------------------------------------------------------- PS side


@contextlib.contextmanager
def _naming_worker(index):
    """Network errors say which worker's connection failed."""
    try:
        yield
    except RemoteFailure:
        raise
    except (OSError, ProtocolError) as error:
        raise type(error)(f"worker {index}: {error}") from error


class ParameterServer:
    def __init__(self, args, listener):
        self.args, self.listener = args, listener
        self.config = _cluster_config(args)
        self.channels = [None] * self.config["workers"]
        self.peers = [None] * self.config["workers"]
        self.wait_seconds = self.update_seconds = 0.0
        self.updates = 0

    def _admit(self):
        """Accepts exactly one connection per worker; bounded in attempts and in time."""
        workers = len(self.channels)
        deadline = time.monotonic() + self.args.net_timeout
        for _ in range(workers * (1 + BAD_CONNECTIONS_PER_WORKER)):
            if None not in self.channels:
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            self.listener.settimeout(remaining)
            try:
                sock, peer = self.listener.accept()
            except socket.timeout:
                break
            channel = Channel(sock, self.args.net_timeout)
            try:
                _, hello = channel.receive_json((HELLO,), step=0)
            except (OSError, ProtocolError):
                channel.close()
                continue
            index = hello.get("task_index")
            mismatched = sorted(key for key, value in self.config.items() if hello.get(key) != value)
            if mismatched:
                message = (
                    f"worker {index} disagrees with the parameter server on {', '.join(mismatched)}: "
                    + ", ".join(f"{key} {hello.get(key)!r} vs {self.config[key]!r}" for key in mismatched)
                )
                channel.fail(message)
                channel.close()
                raise ProtocolError(message)
            if not isinstance(index, int) or not 0 <= index < workers or self.channels[index] is not None:
                channel.fail(f"task index {index!r} is out of range or taken")
                channel.close()
                continue
            self.channels[index], self.peers[index] = channel, {"peer": format_address(peer[:2]), **hello}
        joined = sum(channel is not None for channel in self.channels)
        raise TimeoutError(f"only {joined} of {workers} workers joined within {self.args.net_timeout:g}s")

    def run(self):
        import numpy as np

        self._admit()
        sizes = {peer["params"] for peer in self.peers}
        if len(sizes) != 1:
            raise ProtocolError(f"workers disagree on the number of trainable values: {sorted(sizes)}")
        params = np.empty(sizes.pop(), dtype=np.float32)
        with _naming_worker(0):
            self.channels[0].receive((PARAMS,), step=0, into=params)
        velocity, total, incoming, scratch = (np.zeros_like(params) for _ in range(4))
        for index, channel in enumerate(self.channels):
            with _naming_worker(index):
                channel.send(PARAMS, 0, params)
        workers = len(self.channels)
        for step in range(self.config["total_steps"]):
            waited = time.perf_counter()
            total.fill(0.0)
            for index, channel in enumerate(self.channels):
                with _naming_worker(index):
                    channel.receive((GRADIENTS,), step=step, into=incoming)
                total += incoming
            updating = time.perf_counter()
            total *= 1.0 / workers
            velocity *= SGD_MOMENTUM
            velocity += total
            np.multiply(velocity, SGD_LEARNING_RATE, out=scratch)
            params -= scratch
            if not np.isfinite(params).all():
                raise FloatingPointError(f"a variable is not finite after step {step}")
            self.update_seconds += time.perf_counter() - updating
            self.wait_seconds += updating - waited
            for index, channel in enumerate(self.channels):
                with _naming_worker(index):
                    channel.send(PARAMS, step + 1, params)
            self.updates += 1
        for index, channel in enumerate(self.channels):
            with _naming_worker(index):
                channel.receive_json((DONE,))
            channel.close()
        self.params = params

    def abort(self, message):
        for channel in self.channels:
            if channel is not None:
                channel.fail(f"parameter server: {message}")
                channel.close()

    def metrics(self):
        return [
            metric("updates", self.updates, "steps"),
            metric("ps_gradient_wait", self.wait_seconds, "s"),
            metric("ps_update", self.update_seconds, "s"),
            metric("bytes_received", sum(channel.bytes_received for channel in self.channels), "bytes"),
            metric("bytes_sent", sum(channel.bytes_sent for channel in self.channels), "bytes"),
        ]

    def metadata(self):
        return {
            "workers": self.peers,
            "params": int(self.params.size),
            "address": format_address(self.args.ps_hosts[0]),
        }


def _listener(args):
    if args.ps_listen_fd is not None:
        return socket.socket(fileno=args.ps_listen_fd)
    host, port = args.ps_hosts[0]
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, port))
    listener.listen(len(args.worker_hosts) * (1 + BAD_CONNECTIONS_PER_WORKER))
    return listener


def serve_ps(args, labels, metadata):
    """The parameter-server process: no framework is imported, only numpy."""
    server = None
    try:
        listener = _listener(args)
        server = ParameterServer(args, listener)
        try:
            server.run()
        finally:
            listener.close()
        metadata["ps"] = server.metadata()
        emit_record(WORKLOAD, labels, server.metrics() + [metric("elapsed", process_elapsed(), "s")], metadata)
        return 0
    except Exception as error:  # noqa: BLE001 - a failed run must still leave its record
        traceback.print_exc(file=sys.stderr)
        if server is not None:
            server.abort(f"{type(error).__name__}: {error}")
        emit_record(WORKLOAD, labels, [], metadata, status="failed", error=f"{type(error).__name__}: {error}")
        return 1


# ------------------------------------------------------------------------------ local launch

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
    record = None
    with open(path, errors="replace") as handle:
        for line in handle:
            if line.startswith(RESULT_PREFIX):
                try:
                    record = json.loads(line[len(RESULT_PREFIX) :])
                except ValueError:
                    pass
    return record


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
            failed_first = [child.name for child, code in zip(children, codes) if code not in (None, 0)]
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
    # The cluster's FLOPs: every worker's, against the sum of the peaks of their own CPUs/GPUs.
    if all("achieved_flops" in v for v in values):
        metrics += [metric("model_flops", values[0]["model_flops"], "GFLOP/sample"),
                    metric("achieved_flops", sum(v["achieved_flops"] for v in values), "GFLOP/s")]
    if all("mfu" in v for v in values):
        peak = sum(v["peak_flops"] for v in values)
        metrics += [metric("peak_flops", peak, "GFLOP/s"),
                    metric("mfu", sum(v["achieved_flops"] for v in values) / peak, "ratio")]
    per_worker = []
    for index, (child, v) in enumerate(zip(workers, values)):
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
    for key in ("framework_version", "keras_version", "model_params", "onednn", "device", "tf_function_traces"):
        if key in chief:
            metadata[key] = chief[key]
    return metrics, metadata


def launch_local(args, labels, metadata):
    """Runs 1 PS + args.workers workers as processes here, over 127.0.0.1; prints one aggregate record."""
    directory = tempfile.mkdtemp(prefix="cnn_train-cluster-")
    children, listener = [], None
    try:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind((LOOPBACK, 0))
        listener.listen(args.workers * (1 + BAD_CONNECTIONS_PER_WORKER))
        ps_hosts = [(LOOPBACK, listener.getsockname()[1])]
        worker_hosts = [(LOOPBACK, port) for port in _free_loopback_ports(args.workers)]
        cpus = sorted(os.sched_getaffinity(0))[: args.threads]
        groups = partition(cpus, args.workers)
        package_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        base_env = dict(os.environ)
        base_env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_parent, os.environ.get("PYTHONPATH")]))
        # Labels the children set themselves (threads, role, ...) must not be forced on them.
        from .cli import _own_labels

        child_labels = {k: v for k, v in args.labels_json.items() if k not in _own_labels(args, always_mode=True)}

        def launch(role, index, threads):
            return _child_argv(args, role, index, threads, ps_hosts, worker_hosts, child_labels)

        # The PS runs on CPU, on any CPU this process may use: it mostly waits.
        ps_argv = launch("ps", 0, 1) + ["--ps-listen-fd", str(listener.fileno())]
        ps_env = {**base_env, "CUDA_VISIBLE_DEVICES": ""}
        ps = _Child("ps", ps_argv, ps_env, directory, pass_fds=(listener.fileno(),))
        children.append(ps)
        listener.close()  # the PS holds it now
        listener = None
        workers = []
        for index, group in enumerate(groups):
            gpu = args.gpus[index] if args.gpus else None
            env = {**base_env, "CUDA_VISIBLE_DEVICES": gpu if gpu is not None else ""}
            role = "chief" if index == 0 else "worker"
            child = _Child(f"worker{index}", launch(role, index, len(group)), env, directory, set(group), gpu)
            workers.append(child)
            children.append(child)
        failed_first, stopped = _wait_all(children, args.launch_timeout)
        for child in children:
            child.collect()
        metadata["cluster"] = {
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
            for child in failures:
                sys.stderr.write(f"--- {child.name} stderr (last lines) ---\n{_tail(child.stderr_path)}")
            # The cause comes first: a process killed by a signal, else the one seen failing first;
            # the others mostly report its consequences (peers see closed connections).
            failures.sort(key=lambda child: (not (child.returncode or 0) < 0, child.name not in failed_first))
            reasons = [child.failure() for child in failures if child.name not in stopped]
            if stopped:
                why = (
                    f"after {', '.join(failed_first)} failed"
                    if failed_first
                    else f"at the {args.launch_timeout:g}s time limit"
                )
                reasons.append(f"stopped by the launcher {why}: {', '.join(stopped)}")
            emit_record(WORKLOAD, labels, [], metadata, status="failed", error="; ".join(reasons))
            return 1
        metrics, cluster_metadata = _aggregate(args, workers, ps)
        metadata.update(cluster_metadata)
        emit_record(WORKLOAD, labels, metrics + [metric("elapsed", process_elapsed(), "s")], metadata)
        return 0
    except Exception as error:  # noqa: BLE001 - a failed run must still leave its record
        traceback.print_exc(file=sys.stderr)
        for child in children:
            child.stop()
        emit_record(WORKLOAD, labels, [], metadata, status="failed", error=f"{type(error).__name__}: {error}")
        return 1
    finally:
        if listener is not None:
            listener.close()
        shutil.rmtree(directory, ignore_errors=True)
