# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""An instance of a cell that runs on another runner host, started and stopped over SSH from the cell's home host.

``platbench.lab.run_instances`` runs every instance of a cell as a local argv and stops it with its session and
its ``stop`` argv (module_utils/supervisor.py). An instance on another runner host (``instances.hosts`` above 1)
is the same: its argv is an ``ssh`` client that runs one shell line there, and its ``stop`` another ``ssh`` line.
Killing the local ssh client does not end what it started (no terminal is asked for, so no hang-up reaches it),
hence the stop line:

- a process (bm): the line makes the runtime directory, changes to the instance's directory and starts a shell in
  a session of its own (``setsid --wait``, which hands back its exit status) that writes its process id, the id of
  its process group, to ``<runtime dir>/<instance name>.pid`` and becomes the workload with its environment
  (``exec env K=V ...``); the login shell removes the file when the workload has exited. The stop line reads the
  file, sends SIGTERM to that process group, waits up to ``grace`` seconds, sends SIGKILL, and removes the file;
- a container (cn, pd): the engine's ``run --rm`` line itself; its stop line the engine's ``rm --force NAME``.

The lines are POSIX sh (the remote user's login shell runs them; dash takes them as bash does). Every argv
is built here and quoted with ``shlex``: nothing of the plan is pasted into a line unquoted.

Pure Python with the standard library: the cell plan imports it, and the tests run the lines locally.
"""

from __future__ import annotations

import shlex

SSH_OPTIONS = ("-o", "BatchMode=yes", "-o", "ConnectTimeout=10")
CONNECT_SECONDS = 10  # ConnectTimeout above: a stop line may take this long before it reaches the host
RUNTIME_DIR = "/run/platbench"  # where a remote process instance's pid file lives (root's tmpfs)
PID_SUFFIX = ".pid"


class RemoteInstanceError(ValueError):
    """A remote instance cannot be planned as asked; the message says which input and why."""


def target(address, user=None, port=None, key=None, name=None):
    """Where an instance's ssh client connects: ``address`` (an IP address or a DNS name), as ``user`` (None:
    ssh's own choice), on ``port`` (None: 22 or the client's configuration), with the private ``key`` file
    on the home host (None: the client's own keys). ``name`` is the inventory host, for messages."""
    if not address or not isinstance(address, str) or address.startswith("-") or any(c.isspace() for c in address):
        raise RemoteInstanceError(f"runner host {name or '?'}: no usable address to reach it over SSH ({address!r})")
    if user is not None and (not str(user) or str(user).startswith("-") or "@" in str(user)):
        raise RemoteInstanceError(f"runner host {name or address}: {user!r} is no SSH user name")
    if port is not None and (isinstance(port, bool) or not str(port).isdigit() or not 0 < int(port) < 65536):
        raise RemoteInstanceError(f"runner host {name or address}: {port!r} is no TCP port")
    return {
        "name": name or address,
        "address": address,
        "user": str(user) if user else None,
        "port": int(port) if port is not None else None,
        "key": str(key) if key else None,
    }


def ssh_argv(where, line):
    """The ssh client's argv that runs ``line`` (one shell line) on ``where`` (``target()``): no password prompt,
    a bounded connection time, and ``--`` before the line, which the remote login shell receives as is."""
    argv = ["ssh", *SSH_OPTIONS]
    if where.get("port") is not None:
        argv += ["-p", str(where["port"])]
    if where.get("key"):
        argv += ["-i", str(where["key"])]
    destination = f"{where['user']}@{where['address']}" if where.get("user") else where["address"]
    return [*argv, destination, "--", line]


def check_argv(where):
    """The argv that tells whether the home host reaches ``where`` without a password (exit status 0)."""
    return ssh_argv(where, "true")


def pid_file(name, runtime_dir=RUNTIME_DIR):
    """The pid file of the remote process instance ``name``."""
    if not name or "/" in name or name.startswith("."):
        raise RemoteInstanceError(f"{name!r} cannot name a pid file")
    return f"{str(runtime_dir).rstrip('/') or '/'}/{name}{PID_SUFFIX}"


def process_line(name, argv, env=None, chdir=None, runtime_dir=RUNTIME_DIR):
    """The shell line that runs the process instance ``name`` (``argv`` with ``env`` added, in ``chdir``) in a
    session of its own, with its process group's id in its pid file while it runs; exits with its status."""
    if not argv:
        raise RemoteInstanceError(f"instance {name}: no command to run")
    pidfile = shlex.quote(pid_file(name, runtime_dir))
    command = ["env", *(f"{key}={value}" for key, value in sorted((env or {}).items())), *map(str, argv)]
    # The workload replaces the session's shell: its process id is the group's, written down before the exec.
    inner = f"echo $$ > {pidfile} && exec {shlex.join(command)}"
    steps = [f"mkdir -p {shlex.quote(str(runtime_dir))}"]
    if chdir:
        steps.append(f"cd {shlex.quote(str(chdir))}")
    steps.append(f"{{ setsid --wait sh -c {shlex.quote(inner)}; status=$?; rm -f {pidfile}; exit $status; }}")
    return " && ".join(steps)


def process_stop_line(name, grace=5, runtime_dir=RUNTIME_DIR):
    """The shell line that ends the process instance ``name`` started by ``process_line``: SIGTERM to its process
    group, SIGKILL after ``grace`` seconds if it is still there, and its pid file removed. Does nothing when the
    file is gone (the instance ended by itself)."""
    pidfile = shlex.quote(pid_file(name, runtime_dir))
    seconds = max(int(grace), 1)
    ticks = " ".join(str(tick) for tick in range(seconds * 10))
    return (
        f"pgid=$(cat {pidfile} 2>/dev/null); "
        'case "$pgid" in ""|*[!0-9]*) exit 0;; esac; '
        'kill -s TERM -- "-$pgid" 2>/dev/null; '
        f'for tick in {ticks}; do kill -s 0 -- "-$pgid" 2>/dev/null || break; sleep 0.1; done; '
        'kill -s KILL -- "-$pgid" 2>/dev/null; '
        f"rm -f {pidfile}; exit 0"
    )


def process_instance(instance, where, grace=5, runtime_dir=RUNTIME_DIR):
    """``instance`` (a supervisor spec of a process: argv, env, chdir) run on ``where`` instead: its argv the ssh
    client, its environment and directory on the other host, its stop the ssh line that ends it there."""
    name = instance["name"]
    line = process_line(name, instance["argv"], instance.get("env"), instance.get("chdir"), runtime_dir)
    return {
        **instance,
        "argv": ssh_argv(where, line),
        "env": {},
        "chdir": None,
        "stop": ssh_argv(where, process_stop_line(name, grace, runtime_dir)),
        "stop_timeout": stop_timeout(grace),
        "host": where["name"],
        "place": None,  # the ssh client stays the harness's; sshd starts the instance there
    }


def container_instance(instance, where, grace=5):
    """``instance`` (a supervisor spec of a container: its engine's ``run --rm`` argv, its ``stop`` the engine's
    ``rm --force NAME``) run on ``where``: both over ssh."""
    if not instance.get("stop"):
        raise RemoteInstanceError(f"instance {instance['name']}: a container instance needs its engine's stop command")
    return {
        **instance,
        "argv": ssh_argv(where, shlex.join(str(arg) for arg in instance["argv"])),
        "env": {},
        "chdir": None,
        "stop": ssh_argv(where, shlex.join(str(arg) for arg in instance["stop"])),
        "stop_timeout": stop_timeout(grace),
        "host": where["name"],
        "place": None,
    }


def stop_timeout(grace):
    """Seconds a remote stop line may take: the connection, the grace period, and a margin."""
    return CONNECT_SECONDS + max(int(grace), 1) + 5
