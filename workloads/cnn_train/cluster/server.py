"""The parameter-server process: it holds the variables, workers push gradients and pull them.

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
"""

import contextlib
import socket
import time

from ...common.harness import Outcome
from ...common.record import metric
from ..settings import SGD_LEARNING_RATE, SGD_MOMENTUM
from .addresses import format_address
from .wire import DONE, GRADIENTS, HELLO, PARAMS, Channel, ProtocolError, RemoteFailure, cluster_config

BAD_CONNECTIONS_PER_WORKER = 4  # stray or malformed connections the PS tolerates before giving up


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
        self.config = cluster_config(args)
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
            except TimeoutError:
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


def serve_ps(args, run):
    """The harness body of the parameter-server process: no framework is imported, only numpy."""
    run.devices = []  # it averages on the CPU, whatever GPUs the host has
    listener = _listener(args)
    server = ParameterServer(args, listener)
    run.on_failure(server.abort)
    try:
        server.run()
    finally:
        listener.close()
    run.metadata["ps"] = server.metadata()
    return Outcome(server.metrics())
