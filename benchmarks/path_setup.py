"""Benchmark (not a test): what a cell's network path costs to set up and tear down, on bm and on cn.

It runs the module a cell runs, ``platbench.lab.network_path``, as Ansible runs it on the host (its file with
the arguments, no controller around it), and times, per platform, path and instance count:

- bm: building the path (a bridge, and per instance a namespace with a veth, plus a VXLAN device for overlay)
  and removing it;
- cn: the same into the namespaces of holder containers (``docker run --network none``, as
  roles/platform_run/tasks/instances.yml starts them), with starting and removing the holders counted in, since a
  cell makes them only for its path.

Target: set-up plus tear-down under 2 s a cell. Run as root on a host with iproute2 (and Docker for cn); every name
carries the benchmark's own tag and is removed afterwards, also when a step fails.

    python benchmarks/path_setup.py [--platforms bm,cn] [--paths bridge,overlay] [--instances 2,3]
                                    [--repeats 5] [--image platbench/workload]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

from _runs import REPO_ROOT

COLLECTIONS = os.path.join(REPO_ROOT, "collections")
MODULE = os.path.join(COLLECTIONS, "ansible_collections", "platbench", "lab", "plugins", "modules", "network_path.py")
TARGET_SECONDS = 2.0
STEP_TIMEOUT = 120


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--platforms", default="bm,cn", help="comma-separated, of bm and cn")
    parser.add_argument("--paths", default="bridge,overlay", help="comma-separated, of bridge and overlay")
    parser.add_argument("--instances", default="2,3", help="comma-separated instance counts")
    parser.add_argument("--repeats", type=int, default=5, help="set-ups and tear-downs per combination")
    parser.add_argument("--image", default="platbench/workload", help="the holders' image (cn): the lab's own")
    args = parser.parse_args(argv)
    args.platforms, args.paths = args.platforms.split(","), args.paths.split(",")
    args.instances = [int(count) for count in args.instances.split(",")]
    for name, given, allowed in (
        ("--platforms", args.platforms, ("bm", "cn")),
        ("--paths", args.paths, ("bridge", "overlay")),
    ):
        unknown = sorted(set(given) - set(allowed))
        if unknown:
            parser.error(f"{name}: unknown {', '.join(unknown)}; choose from {', '.join(allowed)}")
    if os.geteuid() != 0:
        parser.error("namespaces, bridges and VXLAN devices are made on this host: run as root")
    return args


def _run(argv):
    done = subprocess.run(argv, capture_output=True, text=True, timeout=STEP_TIMEOUT, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {(done.stderr or done.stdout).strip()}")
    return done.stdout


def network_path(**args):
    """Run the module with ``args`` on this host, as Ansible would: its result, or RuntimeError with its message."""
    with tempfile.NamedTemporaryFile("w", suffix=".json") as handle:
        json.dump({"ANSIBLE_MODULE_ARGS": args}, handle)
        handle.flush()
        done = subprocess.run(
            [sys.executable, MODULE, handle.name],
            capture_output=True,
            text=True,
            timeout=STEP_TIMEOUT,
            env=dict(os.environ, PYTHONPATH=COLLECTIONS),
            check=False,
        )
    result = json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else {}
    if done.returncode != 0 or result.get("failed"):
        raise RuntimeError(f"network_path {args}: {result.get('msg') or done.stderr.strip()}")
    return result


def _holders(image, tag, count):
    """Start the cell's holder containers (no network of their own); their names and process ids."""
    names = [f"{tag}-holder-{index}" for index in range(count)]
    for name in names:
        _run(["docker", "run", "--detach", "--rm", "--network", "none", "--name", name, image, "sleep", "300"])
    pids = [int(_run(["docker", "inspect", "--format", "{{.State.Pid}}", name]).strip()) for name in names]
    return names, pids


def one_cell(platform, path, count, image):
    """(set-up seconds, tear-down seconds) of one cell's path."""
    key = f"path-setup-bench-{uuid.uuid4().hex}"
    names = []
    try:
        started = time.perf_counter()
        pids = None
        if platform == "cn":
            names, pids = _holders(image, key[-12:], count)
        built = network_path(key=key, path=path, instances=count, platform=platform, **({"pids": pids} if pids else {}))
        if not built.get("changed"):
            raise RuntimeError(f"the {path} path was not built: {built}")
        ready = time.perf_counter()
        network_path(key=key, state="absent")
        if names:
            _run(["docker", "rm", "--force", *names])
            names = []
        return ready - started, time.perf_counter() - ready
    finally:
        # whatever a failed step left: the path by its tag, the holders by name
        try:
            network_path(key=key, state="absent")
        finally:
            if names:
                subprocess.run(
                    ["docker", "rm", "--force", *names], capture_output=True, timeout=STEP_TIMEOUT, check=False
                )


def main(argv=None):
    bench = parse_args(argv)
    if "cn" in bench.platforms:
        _run(["docker", "image", "inspect", bench.image])  # fails now, naming the image, not halfway through
    print(f"{bench.repeats} set-ups and tear-downs each; target: set-up + tear-down < {TARGET_SECONDS} s a cell")
    print(f"{'platform':8} {'path':8} {'instances':>9} {'set-up s':>9} {'tear-down s':>12} {'total s':>8}  verdict")
    verdicts = []
    for platform in bench.platforms:
        for path in bench.paths:
            for count in bench.instances:
                runs = [one_cell(platform, path, count, bench.image) for _ in range(bench.repeats)]
                setup = statistics.median(run[0] for run in runs)
                teardown = statistics.median(run[1] for run in runs)
                total = statistics.median(run[0] + run[1] for run in runs)
                verdicts.append(total < TARGET_SECONDS)
                verdict = "met" if verdicts[-1] else "missed"
                print(f"{platform:8} {path:8} {count:>9} {setup:>9.3f} {teardown:>12.3f} {total:>8.3f}  {verdict}")
    return 0 if all(verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
