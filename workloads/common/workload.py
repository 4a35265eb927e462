"""One workload contract: what a workload declares, and the one ``main`` that runs every workload.

PerfKitBenchmarker's benchmark modules each declare a config and their phases and leave the rest to the
framework; here each ``workloads/<name>/cli.py`` declares a ``Workload``: its name and description, the
arguments it adds, the checks argparse cannot make, its own labels, what it adds to the metadata, and its body.
``Workload.main`` does the rest, the same for all: parse, resolve ``--threads`` against the CPUs this process may
use, refuse ``--labels-json`` that contradicts the run's own labels, stop after ``--check-args``, probe the
environment, set the thread variables, and hand the body to ``harness.run_workload`` (one record, whatever
happens)::

    SPEC = Workload(
        name="micro_mem",
        description="...",
        arguments=_arguments,            # parser -> None: the workload's own options
        own_labels=_own_labels,          # args -> labels (workload and threads are added)
        body=_measure,                   # (args, run) -> Outcome
    )
    main, parse_args = SPEC.main, SPEC.parse_args

Stdlib only, and no framework import: ``--check-args`` runs at plan time on the controller.
"""

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..datasets.base import DatasetError
from .args import add_check_args, add_run_arguments, check_extra_labels, resolve_threads
from .environment import probe_environment, set_thread_env
from .harness import run_workload


def _nothing(*_):
    return {}


@dataclass(frozen=True)
class Workload:
    """A workload's declaration (see the module's docstring); ``main`` runs it."""

    name: str
    description: str
    # parser -> None: declares the workload's own options (parser.add_argument, argument groups), before the
    # common ones.
    arguments: Callable[[argparse.ArgumentParser], None]
    # args -> the labels of its record, besides "workload" and "threads" (which main adds). A label whose value
    # is None is not known before the run (device auto, a searched batch size): it is left out of the check of
    # --labels-json and kept, as None, in the record's labels until the body sets it.
    own_labels: Callable[[argparse.Namespace], dict]
    # (args, run) -> harness.Outcome: the measurement.
    body: Callable
    # What --check-args cannot check, because it depends on the host that runs the job (its help says it).
    not_checked: str | None = None
    # (parser, args, allowed_cpus) -> None: the checks argparse cannot make, defaults that depend on other
    # arguments; calls parser.error. allowed_cpus is None under --check-args (the runner's CPUs are not known).
    validate: Callable | None = None
    # args -> metadata the record carries besides the environment probe and the seed.
    metadata: Callable[[argparse.Namespace], dict] = _nothing
    # The common options: --threads, --seed, --labels-json and --peak-gflops (args.add_run_arguments).
    run_arguments: Callable[[Callable], None] = add_run_arguments
    # Whether main sets the compute-thread variables (OMP_NUM_THREADS, ...) to --threads before the body; a body
    # that starts processes of its own with other counts (cnn_train's ranks) sets them itself.
    sets_thread_env: bool = True

    @property
    def prog(self):
        return f"python -m workloads.{self.name}"

    def build_parser(self):
        parser = argparse.ArgumentParser(prog=self.prog, description=self.description)
        self.arguments(parser)
        self.run_arguments(parser.add_argument)
        add_check_args(parser.add_argument, self.not_checked)
        return parser

    def labels(self, args):
        """The run's own labels: the workload's, with its name and --threads."""
        return {"workload": self.name, **self.own_labels(args), "threads": args.threads}

    def parse_args(self, argv=None, parser=None):
        """Parsed and validated arguments, defaults filled in; exits 2 (parser.error) on bad input."""
        parser = parser or self.build_parser()
        args = parser.parse_args(argv)
        args.threads_given = args.threads is not None
        allowed_cpus = resolve_threads(parser, args)
        if self.validate is not None:
            self.validate(parser, args, allowed_cpus)
        known = {key: value for key, value in self.labels(args).items() if value is not None}
        check_extra_labels(parser, args.labels_json, known)
        return args

    def usage_error(self, message):
        """What parser.error does, for a usage error only the body can find (a --device the framework does not
        have, a --data-dir it cannot read): the message on stderr and exit 2, no record (harness's docstring)."""
        self.build_parser().error(message)

    def load_data(self, load, *load_args):
        """(data, seconds): ``load(*load_args)`` timed (the ``data_load`` metric). A DatasetError (--data-dir does
        not hold the data in its published layout) is a usage error naming --data-dir, as if the parser found it."""
        started = time.perf_counter()
        try:
            data = load(*load_args)
        except DatasetError as error:
            self.usage_error(f"--data-dir: {error}")
        return data, time.perf_counter() - started

    def main(self, argv=None):
        """The process's exit code: 0 for an ok or skipped record (or valid --check-args), 1 failed, 2 usage."""
        args = self.parse_args(argv)
        if args.check_args:
            return 0
        labels = {**args.labels_json, **self.labels(args)}
        metadata = {**probe_environment(), "seed": args.seed, **self.metadata(args)}
        if self.sets_thread_env:
            set_thread_env(args.threads)
        return run_workload(self.name, labels, metadata, lambda run: self.body(args, run))
