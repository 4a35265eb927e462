"""workloads.common.harness: one record per run, whatever happens to it."""

import ast
import math
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from workload_run import ENV, REPO_ROOT, metric_values, records_of

from workloads.common import gpus
from workloads.common.clock import process_elapsed
from workloads.common.harness import FlopCount, Outcome, WorkloadFailed, placement_metadata, run_workload
from workloads.common.record import KEPT_FILES_CHARS, metric


@pytest.fixture(autouse=True)
def restore_signal_handlers():
    """run_workload installs its own SIGTERM/SIGINT handlers; pytest's come back after each test."""
    saved = {number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGINT)}
    yield
    for number, handler in saved.items():
        signal.signal(number, handler)


def run(capsys, body, labels=None, metadata=None):
    """(exit code, the one record, stderr) of run_workload(body)."""
    code = run_workload("demo", {"model": "tiny"} if labels is None else labels, metadata or {}, body)
    out, err = capsys.readouterr()
    (record,) = records_of(out)
    return code, record, err


def test_an_ok_run_gets_elapsed_after_its_own_metrics(capsys):
    code, record, _ = run(capsys, lambda run: Outcome([metric("throughput", 10.0, "images/sec")]))
    assert (code, record["status"], record["error"]) == (0, "ok", None)
    assert [entry["metric"] for entry in record["metrics"]] == ["throughput", "elapsed"]
    assert record["metrics"][1]["value"] > 0


def test_work_after_elapsed_adds_its_metrics_without_counting_in_elapsed(capsys):
    taken = {}

    def after():
        taken["elapsed_before"] = process_elapsed()
        time.sleep(0.3)  # the profile's time: must not show in `elapsed`
        return [metric("gpu_kernel_time", 0.25, "s")]

    code, record, _ = run(capsys, lambda run: Outcome([metric("throughput", 10.0, "images/sec")], after_elapsed=after))
    assert code == 0
    assert [entry["metric"] for entry in record["metrics"]] == ["throughput", "elapsed", "gpu_kernel_time"]
    assert record["metrics"][1]["value"] <= taken["elapsed_before"]


def test_flop_metrics_come_after_elapsed_and_use_the_throughput(capsys):
    def body(run):
        return Outcome(
            [metric("throughput", 10.0, "images/sec")], FlopCount(lambda: (2e9, "cpu"), 100.0, "torch", "float32", 1)
        )

    code, record, _ = run(capsys, body)
    names = [entry["metric"] for entry in record["metrics"]]
    assert code == 0 and names == ["throughput", "elapsed", "model_flops", "achieved_flops", "peak_flops", "mfu"]
    values = metric_values(record)
    # 3 passes of 2 GFLOP per sample at 10 samples/s, against 100 GFLOP/s.
    assert (values["model_flops"], values["achieved_flops"], values["peak_flops"]) == (6.0, 60.0, 100.0)
    assert math.isclose(values["mfu"], 0.6)
    assert record["metadata"]["peak_source"] == "--peak-gflops"


def test_an_exception_becomes_the_failed_record_and_tells_the_hooks(capsys):
    told = []

    def body(run):
        run.labels["device"] = "cpu"
        run.metadata["stage"] = "training"
        run.on_failure(told.append)
        raise MemoryError("too big")

    code, record, stderr = run(capsys, body)
    assert (code, record["status"], record["metrics"]) == (1, "failed", [])
    assert record["error"] == "MemoryError: too big" and told == ["MemoryError: too big"]
    assert record["labels"] == {"model": "tiny", "device": "cpu"}
    launched = record["metadata"].pop("launched_at")
    # This test process was launched before the record, and not in the future.
    assert 0 < record["timestamp"] - launched < 24 * 3600
    placed = {key: record["metadata"].pop(key) for key in ("sched_policy", "nice", "cgroup", "environment_sha256")}
    assert placed == placement_metadata()  # how the process ran, as it sees itself
    assert record["metadata"] == {"stage": "training", "devices": []}
    assert "Traceback" in stderr and stderr.rstrip().endswith("MemoryError: too big")


def test_workload_failed_is_the_error_as_it_is(capsys):
    def body(run):
        raise WorkloadFailed("worker1 (exit -9): no output")

    code, record, stderr = run(capsys, body)
    assert (code, record["error"]) == (1, "worker1 (exit -9): no output")
    assert "Traceback" not in stderr


def test_a_metric_emit_record_refuses_leaves_a_failed_record_instead(capsys):
    code, record, _ = run(capsys, lambda run: Outcome([metric("throughput", math.nan, "images/sec")]))
    assert (code, record["status"]) == (1, "failed")
    assert record["error"] == "ValueError: metric 'throughput' is not finite: nan"


def test_unprintable_metadata_and_a_failing_hook_still_leave_the_record(capsys):
    def body(run):
        run.metadata["bad"] = math.inf
        run.on_failure(lambda error: 1 / 0)
        raise RuntimeError("boom")

    code, record, stderr = run(capsys, body)
    assert (code, record["error"]) == (1, "RuntimeError: boom")
    assert record["metadata"] == {
        "record_error": "ValueError: Out of range float values are not JSON compliant",
        "devices": [],
    }
    assert "clean-up after the failure failed too: ZeroDivisionError" in stderr


H100 = {
    "index": 0,
    "name": "NVIDIA H100 80GB HBM3",
    "uuid": "GPU-1f0e9d8c-0000-4000-8000-00000000003b",
    "pci_bus_id": "0000:3b:00.0",
    "driver": "550.54.15",
    "cuda": "12.4",
}
CPU_PLAN = '{"count":0,"pci_bus_ids":[]}'


def trained(run):
    return Outcome([metric("throughput", 10.0, "images/sec")])


def probe_sees(monkeypatch, *devices):
    """The harness's probe, faked to see these GPUs (this machine has none)."""
    monkeypatch.setattr(gpus, "probe_devices", lambda: [dict(device) for device in devices])


def test_every_record_says_which_gpus_the_run_used(capsys, monkeypatch):
    monkeypatch.delenv(gpus.EXPECTED_ENV, raising=False)
    code, record, _ = run(capsys, trained)
    assert (code, record["metadata"]["devices"]) == (0, gpus.probe_devices())  # without CUDA: []
    probe_sees(monkeypatch, H100)
    code, record, _ = run(capsys, trained)
    assert (code, record["status"], record["metadata"]["devices"]) == (0, "ok", [H100])  # no plan: no check


def test_a_cpu_cell_whose_run_saw_a_gpu_is_failed_naming_it(capsys, monkeypatch):
    monkeypatch.setenv(gpus.EXPECTED_ENV, CPU_PLAN)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    probe_sees(monkeypatch, H100)
    code, record, _ = run(capsys, trained)
    assert (code, record["status"], record["metrics"]) == (1, "failed", [])
    assert record["error"] == (
        "the cell was planned without GPUs but the run saw 1: NVIDIA H100 80GB HBM3 (0000:3b:00.0); "
        "CUDA_VISIBLE_DEVICES='0'"
    )
    assert record["metadata"]["devices"] == [H100]


def test_a_bm_gpu_cell_that_used_another_gpu_is_failed(capsys, monkeypatch):
    monkeypatch.setenv(gpus.EXPECTED_ENV, '{"count":1,"pci_bus_ids":["0000:5e:00.0"]}')
    probe_sees(monkeypatch, H100)
    code, record, _ = run(capsys, trained)
    assert (code, record["status"]) == (1, "failed")
    assert record["error"].startswith(
        "the cell was planned with 1 GPU(s) (0000:5e:00.0) but the run saw 1: NVIDIA H100 80GB HBM3 (0000:3b:00.0); "
    )
    monkeypatch.setenv(gpus.EXPECTED_ENV, '{"count":1,"pci_bus_ids":["0000:3b:00.0"]}')
    code, record, _ = run(capsys, trained)
    assert (code, record["status"], record["metadata"]["devices"]) == (0, "ok", [H100])


def test_the_devices_a_body_reports_are_checked_instead_of_a_probe(capsys, monkeypatch):
    monkeypatch.setenv(gpus.EXPECTED_ENV, '{"count":2,"pci_bus_ids":null}')
    monkeypatch.setattr(gpus, "probe_devices", lambda: pytest.fail("the body said which devices it used"))

    def launcher(run):
        run.devices = [H100, {**H100, "pci_bus_id": "0000:5e:00.0"}]  # e.g. its workers' records
        return trained(run)

    code, record, _ = run(capsys, launcher)
    assert (code, record["status"], len(record["metadata"]["devices"])) == (0, "ok", 2)


def test_a_malformed_plan_fails_the_run_before_its_body(capsys, monkeypatch):
    monkeypatch.setenv(gpus.EXPECTED_ENV, '{"count": "one"}')
    code, record, stderr = run(capsys, lambda run: pytest.fail("the body must not run"))
    assert (code, record["status"]) == (1, "failed")
    assert record["error"].startswith("""PLATBENCH_EXPECTED_GPUS='{"count": "one"}' is not valid: """)
    assert "Traceback" not in stderr


def test_a_probe_that_fails_fails_a_checked_run_only(capsys, monkeypatch):
    def broken():
        raise RuntimeError("CUDA error: unspecified launch failure")

    monkeypatch.setattr(gpus, "probe_devices", broken)
    monkeypatch.delenv(gpus.EXPECTED_ENV, raising=False)
    code, record, _ = run(capsys, trained)
    assert (code, record["metadata"]["devices"]) == (0, [])
    assert record["metadata"]["devices_error"] == "RuntimeError: CUDA error: unspecified launch failure"
    monkeypatch.setenv(gpus.EXPECTED_ENV, CPU_PLAN)
    code, record, _ = run(capsys, trained)
    assert (code, record["status"]) == (1, "failed")
    assert record["error"] == (
        "the GPUs the run used could not be read to check them against the plan: "
        "RuntimeError: CUDA error: unspecified launch failure"
    )


def test_a_usage_error_inside_the_body_is_not_a_run(capsys):
    def body(run):
        raise SystemExit(2)  # what parser.error does

    with pytest.raises(SystemExit):
        run_workload("demo", {}, {}, body)
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_becomes_a_failed_record_naming_it(stop):
    program = textwrap.dedent("""
        import sys, time
        from workloads.common.harness import run_workload

        def body(run):
            run.on_failure(lambda error: print("told:", error, file=sys.stderr))
            print("ready", file=sys.stderr, flush=True)
            time.sleep(60)

        sys.exit(run_workload("demo", {"model": "tiny"}, {}, body))
    """)
    child = subprocess.Popen(
        [sys.executable, "-c", program],
        cwd=REPO_ROOT,
        env=ENV,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stderr.readline() == "ready\n"
    child.send_signal(stop)
    stdout, stderr = child.communicate(timeout=60)
    (record,) = records_of(stdout)
    name = signal.Signals(stop).name
    assert (child.returncode, record["status"]) == (1, "failed")
    assert record["error"] == f"Terminated: stopped by signal {name}"
    assert f"told: Terminated: stopped by signal {name}" in stderr


def _imports_and_calls(path):
    """(modules a file imports, names it calls) from its syntax tree."""
    tree = ast.parse(path.read_text(), filename=str(path))
    imported, called = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            imported.add("." * node.level + (node.module or ""))
            imported.update(
                "." * node.level + (node.module + "." if node.module else "") + alias.name for alias in node.names
            )
        elif isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Call):
            called.add(getattr(node.func, "id", getattr(node.func, "attr", None)))
    return imported, called


WORKLOAD_FILES = sorted((REPO_ROOT / "workloads").rglob("*.py"))


def test_only_the_harness_prints_records():
    printers = [
        path.relative_to(REPO_ROOT).as_posix()
        for path in WORKLOAD_FILES
        if "emit_record" in _imports_and_calls(path)[1]
    ]
    assert printers == ["workloads/common/harness.py"]


def test_nothing_in_cnn_train_imports_its_command_line_back():
    importers = [
        path.relative_to(REPO_ROOT).as_posix()
        for path in WORKLOAD_FILES
        if any(name.split(".")[-1] == "cli" for name in _imports_and_calls(path)[0])
    ]
    # Only each workload's entry point imports its command line.
    assert importers == sorted(
        path.relative_to(REPO_ROOT).as_posix() for path in REPO_ROOT.glob("workloads/*/__main__.py")
    )
    assert "workloads/cnn_train/__main__.py" in importers


@pytest.mark.parametrize(
    ("code", "expected_rc", "expected_err"), [("None", 0, ""), ("1", 1, ""), ("'bad'", 1, "bad\n")]
)
def test_exit_after_record_keeps_the_buffered_output_and_the_exit_status(code, expected_rc, expected_err):
    script = (
        "import sys, atexit\n"
        "from workloads.common.harness import exit_after_record\n"
        "atexit.register(lambda: print('teardown ran'))\n"
        "sys.stdout.write('PLATBENCH_RESULT {}\\n')  # buffered: a pipe is not a terminal\n"
        f"exit_after_record({code})\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO_ROOT, env=ENV, capture_output=True, text=True, timeout=60, check=False
    )
    # The record is out, the status is the run's, and nothing of the interpreter's teardown ran.
    assert (done.stdout, done.returncode, done.stderr) == ("PLATBENCH_RESULT {}\n", expected_rc, expected_err)


def test_the_temporary_files_a_framework_leaves_to_atexit_go_with_the_processs_own_directory(tmp_path):
    # TensorFlow's autograph writes one source file per converted function and removes it through atexit, which
    # exit_after_record's os._exit skips: each run used to leave them in /tmp.
    script = (
        "import tempfile\n"
        "from workloads.common.harness import exit_after_record, private_tempdir\n"
        "own = private_tempdir()\n"
        "left = tempfile.NamedTemporaryFile('w', prefix='__autograph_generated_file', suffix='.py', delete=False)\n"
        "left.write('pass'); left.close()\n"
        "print(own, left.name, flush=True)\n"
        "exit_after_record(0)\n"
    )
    env = {**ENV, "TMPDIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60, check=True
    )
    own, left = done.stdout.split()
    assert Path(own).parent == tmp_path and Path(left).parent == Path(own)  # the file went into the run's own
    assert list(tmp_path.iterdir()) == []  # and the directory with it, at the process's end


def test_a_run_keeps_its_files_in_its_ok_record_and_a_file_over_the_limit_is_left_out_with_the_reason(capsys):
    def body(run):
        assert run.keep_file("mlperf_log_summary.txt", "Result is : VALID\n")
        assert not run.keep_file("mlperf_log_detail.txt", "x" * KEPT_FILES_CHARS)
        return Outcome([metric("throughput", 10.0, "samples/sec")])

    assert run_workload("demo", {}, {}, body) == 0
    (record,) = records_of(capsys.readouterr().out)
    assert record["files"] == {"mlperf_log_summary.txt": "Result is : VALID\n"}
    reason = record["metadata"]["files_not_kept"]["mlperf_log_detail.txt"]
    assert reason.startswith(f"{KEPT_FILES_CHARS} characters, more than the ")


def test_a_failed_run_keeps_no_files(capsys):
    def body(run):
        run.keep_file("mlperf_log_summary.txt", "text")
        raise RuntimeError("the model broke")

    assert run_workload("demo", {}, {}, body) == 1
    (record,) = records_of(capsys.readouterr().out)
    assert record["status"] == "failed" and "files" not in record


def test_flop_count_of_an_inference_run_is_one_pass_at_its_chosen_rate(capsys):
    def body(run):
        metrics = [metric("throughput", 10.0, "samples/sec"), metric("inference_throughput", 20.0, "samples/sec")]
        count = FlopCount(lambda: (2e9, "cpu"), 100.0, "torch", "float32", 1, 1, rate_metric="inference_throughput")
        return Outcome(metrics, count)

    assert run_workload("demo", {}, {}, body) == 0
    (record,) = records_of(capsys.readouterr().out)
    values = {entry["metric"]: entry["value"] for entry in record["metrics"]}
    assert (values["model_flops"], values["achieved_flops"], values["mfu"]) == (2.0, 40.0, 0.4)
