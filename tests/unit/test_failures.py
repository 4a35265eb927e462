"""A failed cell's error names its cause: failed task results, shaped as the real modules return them."""

import pytest
from ansible_collections.platbench.lab.plugins.plugin_utils.records.failures import (
    describe_failure,
    exit_code,
    failure_output,
    signal_message,
)

RUN_CONTAINER = "Run the workload container to completion"
REMOVE_CONTAINER = "Remove the cell's container"
RUN_PROCESS = "Run the workload as a process on the host"


def docker_exit(status, output="", oom_killed=False):
    """community.docker.docker_container, detach: false, for a container that exited with ``status``:
    msg is the container's output, status its exit code."""
    return {
        "changed": True,
        "failed": True,
        "msg": output,
        "status": status,
        "container": {
            "Id": "0" * 64,
            "Output": output,
            "Image": "sha256:abc",
            "State": {"Status": "exited", "ExitCode": status, "OOMKilled": oom_killed},
        },
    }


def command_exit(rc, stdout="", stderr=""):
    """ansible.builtin.command: rc is -N when the process was killed by signal N."""
    return {
        "changed": True,
        "failed": True,
        "msg": "non-zero return code",
        "rc": rc,
        "cmd": ["python", "-m", "x"],
        "stdout": stdout,
        "stderr": stderr,
        "stdout_lines": stdout.splitlines(),
        "stderr_lines": stderr.splitlines(),
    }


def test_container_killed_by_sigkill_was_rc_137_and_now_says_killed():
    # Seen in a real campaign as "Run the workload container to completion failed: (rc=137)".
    message = describe_failure(RUN_CONTAINER, docker_exit(137))
    assert message.startswith(
        "the workload was killed by SIGKILL (signal 9): the kernel's OOM killer, `docker kill` or the cell timeout"
    )
    assert f"(rc=137, at '{RUN_CONTAINER}')" in message


def test_container_the_oom_killer_stopped_says_so():
    message = describe_failure(RUN_CONTAINER, docker_exit(137, "epoch 1\n", oom_killed=True))
    assert "killed by SIGKILL (signal 9): the kernel's OOM killer (Docker reports OOMKilled)" in message


def test_process_killed_by_a_signal_has_a_negative_rc():
    message = describe_failure(RUN_PROCESS, command_exit(-9, stderr="loading\n"))
    assert message.startswith(
        "the workload was killed by SIGKILL (signal 9): the kernel's OOM killer, a `kill -9` "
        f"or the cell timeout (rc=-9, at '{RUN_PROCESS}')"
    )
    assert "last stderr line: loading" in message


@pytest.mark.parametrize(
    "code, expected",
    [
        (143, "killed by SIGTERM (signal 15): `docker stop`"),
        (-15, "killed by SIGTERM (signal 15)"),
        (139, "killed by SIGSEGV (signal 11): a crash in native code"),
        (134, "killed by SIGABRT (signal 6)"),
        (-7, "killed by SIGBUS (signal 7): a bus error"),
        (130, "killed by SIGINT (signal 2)"),
    ],
)
def test_signals_are_named_with_who_usually_sends_them(code, expected):
    assert expected in signal_message(code)


@pytest.mark.parametrize("code", [None, 0, 1, 2, 127, 128, 255, 300])
def test_ordinary_exit_codes_are_no_signal(code):
    assert signal_message(code) is None


def test_docker_engine_stopped_mid_cell_names_the_engine_not_the_clean_up():
    # Seen in a real campaign as "Remove the cell's container failed: Error connecting...": the clean-up.
    result = {
        "changed": False,
        "failed": True,
        "msg": "Error connecting: Error while fetching server API version: ('Connection aborted.', "
        "FileNotFoundError(2, 'No such file or directory'))",
    }
    message = describe_failure(REMOVE_CONTAINER, result)
    assert message.startswith("the Docker engine stopped answering during the cell")
    assert REMOVE_CONTAINER in message and "Error connecting" in message


def test_docker_engine_gone_while_waiting_for_the_container():
    result = {
        "changed": False,
        "failed": True,
        "msg": "An unexpected requests error occurred when trying to talk to the Docker daemon: "
        "('Connection aborted.', RemoteDisconnected('Remote end closed connection without response'))",
        "exception": "Traceback (most recent call last):\n...",
    }
    assert describe_failure(RUN_CONTAINER, result).startswith("the Docker engine stopped answering during the cell")


def test_docker_cli_without_engine():
    result = command_exit(
        1, stderr="Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?"
    )
    assert describe_failure("Run the workload in the guest's container", result).startswith(
        "the Docker engine stopped answering"
    )


def test_a_network_attach_error_is_not_the_engine_gone():
    result = {"failed": True, "msg": "Error connecting container to network bridge - 404 Client Error"}
    assert describe_failure(RUN_CONTAINER, result).startswith(f"{RUN_CONTAINER} failed: Error connecting container")


def test_task_timeout_names_the_setting():
    # What ansible-core 2.19 returns for a task whose `timeout:` expired.
    result = {
        "changed": False,
        "failed": True,
        "msg": "Task failed: Timed out after 3600 second(s).",
        "timedout": {"frame": "Configure `DISPLAY_TRACEBACK` to see a traceback on timeout errors.", "period": 3600},
    }
    message = describe_failure(RUN_CONTAINER, result)
    assert message.startswith("stopped by the cell timeout (3600 s): its task did not end within it")
    assert "raise platform_run_cell_timeout" in message
    assert describe_failure(RUN_CONTAINER, {"msg": "Timed out after 60 second(s)."}).startswith(
        "stopped by the cell timeout (60 s)"
    )


# What ansible.builtin.raw returns when coreutils' timeout (the process cell's deadline) stopped the workload; raw
# over SSH with a tty merges stderr into stdout.
RAW_TERM = {"rc": 124, "stdout": "step 10\n", "stderr": "timeout: sending signal TERM to command \u2018env\u2019\n"}
RAW_KILL = {
    "rc": 255,
    "stdout": "timeout: sending signal TERM to command 'env'\r\ntimeout: sending signal KILL to command 'env'\r\n",
    "stderr": "",
}


@pytest.mark.parametrize(
    "result, how",
    [(RAW_TERM, "got SIGTERM and ended"), (RAW_KILL, "ignored SIGTERM and its process group was killed 10 s later")],
    ids=["term", "kill"],
)
def test_a_process_stopped_by_its_deadline_reads_as_the_cell_timeout(result, how):
    message = describe_failure(RUN_PROCESS, {"failed": True, "msg": "non-zero return code", **result}, timeout=7)
    assert message.startswith("stopped by the cell timeout (7 s): the workload") and how in message, message
    assert f"(at '{RUN_PROCESS}')" in message and "raise platform_run_cell_timeout" in message


def test_a_sigkill_without_the_deadline_line_is_no_timeout():
    # The OOM killer's SIGKILL also ends a process with 137: without coreutils' own line it is not the deadline.
    message = describe_failure(RUN_PROCESS, command_exit(137, stderr="Killed\n"), timeout=7)
    assert "cell timeout (7 s)" not in message and message.startswith("the workload was killed by SIGKILL")
    # Nor is a workload's own exit status 124.
    assert "cell timeout" not in describe_failure(RUN_PROCESS, command_exit(124, stderr="error: bad\n"), timeout=7)


def test_other_failures_keep_task_msg_rc_and_last_stderr_line():
    message = describe_failure(RUN_PROCESS, command_exit(2, stderr="usage: ...\nerror: argument --model: bad\n\n"))
    assert message == (f"{RUN_PROCESS} failed: non-zero return code (rc=2) error: argument --model: bad")
    assert describe_failure(None, {}) == "a task failed: no message (rc=n/a)"


def test_a_failed_container_shows_the_last_line_of_its_output_not_all_of_it():
    output = "\n".join(f"log {n}" for n in range(500)) + "\nImportError: no module named tensorflow\n"
    message = describe_failure(RUN_CONTAINER, docker_exit(1, output))
    assert message == (
        f"{RUN_CONTAINER} failed: exited with status 1; last output line: "
        "ImportError: no module named tensorflow (rc=1)"
    )


def test_the_workloads_own_error_comes_first_when_it_printed_one():
    message = describe_failure(RUN_CONTAINER, docker_exit(1, "x"), workload_error="RuntimeError: CUDA OOM")
    assert message == f"the workload failed: RuntimeError: CUDA OOM (at '{RUN_CONTAINER}', rc=1)"


def test_long_messages_are_clipped():
    assert len(describe_failure("t", {"msg": "x" * 100000, "rc": 1})) < 3000


def test_exit_code_and_output_from_each_module_shape():
    assert exit_code(docker_exit(137)) == 137
    assert exit_code({"container": {"State": {"ExitCode": 143}}}) == 143
    assert exit_code(command_exit(-9)) == -9
    assert exit_code({"rc": True}) is None and exit_code({}) is None
    assert failure_output(docker_exit(1, "out\n")) == "out\n"
    assert failure_output(command_exit(1, "out", "err")) == "out\nerr"
    assert failure_output({"module_stdout": "", "module_stderr": "Traceback"}) == "Traceback"
    assert failure_output(None) == ""


def test_a_container_in_a_guest_killed_over_ssh_is_still_a_container():
    # vmcn: `docker run` in the guest, through ansible.builtin.command over SSH: rc 137, no docker result keys.
    message = describe_failure("Run the workload in the guest's container", command_exit(137))
    assert "`docker kill`" in message
    assert "`kill -9`" in describe_failure("Run the workload in the guest", command_exit(137))


def test_a_module_that_crashed_shows_the_last_line_of_its_traceback():
    result = {
        "failed": True,
        "msg": "MODULE FAILURE: No start of json char found",
        "rc": 1,
        "module_stdout": "",
        "module_stderr": "Traceback (most recent call last):\n  ...\nModuleNotFoundError: No module named 'requests'\n",
    }
    assert describe_failure(RUN_CONTAINER, result) == (
        f"{RUN_CONTAINER} failed: MODULE FAILURE: No start of json char found (rc=1) "
        "ModuleNotFoundError: No module named 'requests'"
    )
