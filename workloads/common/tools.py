"""The system tools the micro-benchmarks run (hpcc, ioping, fio, iperf3...): found, versioned, run.

A micro-benchmark never re-implements a tool: it runs the distribution's binary and parses the
tool's own output. This module owns what each of them needs around that:

- ``require(names)``: the path of each tool, or a WorkloadFailed that names the missing tool, the
  package that provides it and where the lab installs it (so the message says what to do);
- ``versions(names)``: the installed version of each, for the record's ``metadata.tool_versions``
  (the package's version, which says more than a banner: Debian's revision included);
- ``run(argv, ...)``: a bounded run; a timeout or a non-zero exit becomes a WorkloadFailed with the
  command and the last lines of its output.

Stdlib only.
"""

import shutil
import subprocess
from typing import NamedTuple

from .harness import WorkloadFailed

OUTPUT_TAIL_LINES = 8


class Tool(NamedTuple):
    package: str  # the Debian/Ubuntu package that provides it (EL names differ; see roles/micro_tools)
    version_argv: tuple  # how to ask the binary itself, where no package database answers


TOOLS = {
    "hpcc": Tool("hpcc", ()),  # hpcc prints its version only into its output file (VersionMajor=...)
    "ioping": Tool("ioping", ("ioping", "-v")),
    "fio": Tool("fio", ("fio", "--version")),
    "iperf3": Tool("iperf3", ("iperf3", "--version")),
    "dd": Tool("coreutils", ("dd", "--version")),
    "xhpcg": Tool("hpcg", ()),  # built from source by platbench.lab.micro_tools (no distribution package)
}

# Where the lab installs the packages, per kind of platform; the message names all of them.
INSTALL_HINT = (
    "on bare metal (bm, and the hosts of sg/k8s) the role platbench.lab.micro_tools installs it "
    "(site.yml, playbooks/lab_host.yml); in the container image (cn, vmcn, sg, k8s) the list "
    "workload_image_micro_packages of platbench.lab.workload_image; in VM guests (vm) the list "
    "guest_image_micro_packages of platbench.lab.guest_image. Rebuild the lab (make lab / ansible-playbook site.yml)"
)


def missing_message(name, where="this platform"):
    tool = TOOLS.get(name, Tool(name, ()))
    return f"{name} is not installed on {where}: it comes from the package {tool.package!r}; {INSTALL_HINT}"


def require(names, where="this platform"):
    """{name: absolute path} of each tool, or WorkloadFailed naming the first missing one and its fix."""
    found = {}
    for name in names:
        path = shutil.which(name)
        if path is None:
            raise WorkloadFailed(missing_message(name, where))
        found[name] = path
    return found


def _package_version(package):
    try:
        done = subprocess.run(
            ["dpkg-query", "-W", "-f", "${Version}", package],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def _banner_version(argv):
    if not argv or shutil.which(argv[0]) is None:
        return None
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = (done.stdout or done.stderr or "").strip().splitlines()
    return lines[0].strip() if lines else None


def version(name):
    """The installed version of tool ``name``: its package's version, else its own banner, else None."""
    tool = TOOLS.get(name, Tool(name, (name, "--version")))
    return _package_version(tool.package) or _banner_version(tool.version_argv)


def versions(names):
    """{name: version or None} for the record's metadata.tool_versions."""
    return {name: version(name) for name in names}


def output_tail(text, lines=OUTPUT_TAIL_LINES):
    return " | ".join(line.strip() for line in (text or "").strip().splitlines()[-lines:] if line.strip())


def run(argv, timeout, cwd=None, env=None, check=True):
    """subprocess.run with captured text output; WorkloadFailed on a timeout or (check) a non-zero exit."""
    try:
        done = subprocess.run(
            [str(part) for part in argv], capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env, check=False
        )
    except subprocess.TimeoutExpired as expired:
        raise WorkloadFailed(f"{argv[0]} did not finish within {timeout} s: {' '.join(map(str, argv))}") from expired
    if check and done.returncode != 0:
        raise WorkloadFailed(
            f"{argv[0]} exited with {done.returncode}: {' '.join(map(str, argv))}: "
            + (output_tail(done.stderr) or output_tail(done.stdout) or "no output")
        )
    return done
