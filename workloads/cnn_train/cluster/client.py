"""A worker's side of parameter-server training (see server.py for the update it takes part in)."""

import time

from .addresses import format_address
from .wire import DONE, GRADIENTS, HELLO, PARAMS, cluster_config, connect


class PsClient:
    """A worker's link to the PS: step(batch) = local gradients -> PS -> new variables."""

    def __init__(self, args, trainer):
        import numpy as np

        self.trainer, self.args = trainer, args
        started = time.perf_counter()
        self.channel = connect(args.ps_hosts[0], args.net_timeout)
        params = np.ascontiguousarray(trainer.get_params(), dtype=np.float32)
        hello = {**cluster_config(args), "task_index": args.task_index, "role": args.role, "params": int(params.size)}
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
