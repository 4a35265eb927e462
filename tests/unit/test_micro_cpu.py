"""workloads.micro_cpu: hpcc's output parsed from a saved real file, its input file, the HPL sizes against the
instance's memory, HPCG's report, and the workload run as the hosts run it (`python -m workloads.micro_cpu`)."""

import argparse
import subprocess
import sys
from pathlib import Path

import pytest
from workload_run import ENV, REPO_ROOT, metric_values, only_record, records_of, run_module

from tests import skips
from workloads.common import hpcc
from workloads.common.harness import WorkloadFailed
from workloads.common.metric_table import METRICS
from workloads.micro_cpu import cli, hpcg

DATA = Path(__file__).parent / "data"
# A real hpccoutf.txt of Debian's hpcc 1.5.0-3 (OpenBLAS 0.3.21 pthread, 2 threads) on this project's
# 2-core development machine, HPL at N = 2000 and 3000, NB 192; the machine was busy with other jobs.
REAL_OUTPUT = (DATA / "hpccoutf_2n.txt").read_text()
GIB = 1 << 30
needs_hpcc = skips.needs_lab("hpcc")


def test_the_saved_real_output_gives_every_hpl_size_as_printed():
    output = hpcc.parse_output(REAL_OUTPUT)
    assert output.hpl == [
        hpcc.HplResult(2000, 192, 1, 1, 0.12, 43.43, "WR11C2R4", 0.0035020, "PASSED"),
        hpcc.HplResult(3000, 192, 1, 1, 0.60, 29.90, "WR11C2R4", 0.0038079, "PASSED"),
    ]
    hpcc.check_output(output, [2000, 3000])


def test_the_saved_real_output_gives_dgemm_stream_and_the_version_from_its_summary():
    output = hpcc.parse_output(REAL_OUTPUT)
    assert output.number("SingleDGEMM_Gflops") == 60.7587
    assert output.number("StarDGEMM_Gflops") == 57.3798
    assert output.number("HPL_Tflops") == 0.0434332
    assert output.version == "1.5.0f"
    assert [(entry["metric"], entry["value"], entry["unit"]) for entry in hpcc.stream_metrics(output)] == [
        ("stream_copy", 29.6317, "GB/s"),
        ("stream_scale", 25.4767, "GB/s"),
        ("stream_add", 26.8644, "GB/s"),
        ("stream_triad", 26.346, "GB/s"),
    ]
    metadata = hpcc.run_metadata(output, 192)
    assert metadata["hpcc_version"] == "1.5.0f"
    assert metadata["hpcc_summary"]["STREAM_VectorSize"] == "3000000"
    assert metadata["hpcc_summary"]["DGEMM_N"] == "1731"
    assert [run["n"] for run in metadata["hpl_runs"]] == [2000, 3000]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("0.0038079 ...... PASSED", "0.0038079 ...... FAILED"), "HPL at N=3000 failed its residual check: FAILED"),
        (("Success=1", "Success=0"), "hpcc reports a failed run in hpccoutf.txt: Success=0"),
        (("Success=1", "Success=1\nFailure=1"), "Success=1, Failure=1"),
        (("Begin of Summary section.", "Begin of Summary section, cut."), "has no Summary section"),
    ],
)
def test_a_failed_check_in_the_output_fails_the_run(change, message):
    # The saved real file with one line altered, to show each failure hpcc can report.
    output = hpcc.parse_output(REAL_OUTPUT.replace(*change))
    with pytest.raises(WorkloadFailed, match=message.replace("(", r"\(")):
        hpcc.check_output(output, [2000, 3000])


def test_a_size_without_an_hpl_result_fails_the_run():
    with pytest.raises(WorkloadFailed, match="has no HPL result for N=5000"):
        hpcc.check_output(hpcc.parse_output(REAL_OUTPUT), [2000, 3000, 5000])


def test_a_summary_without_a_figure_names_it():
    with pytest.raises(WorkloadFailed, match="no numeric SingleDGEMM_Gflops"):
        hpcc.parse_output(REAL_OUTPUT.replace("SingleDGEMM_Gflops=60.7587", "")).number("SingleDGEMM_Gflops")


def test_each_size_is_solved_the_asked_number_of_times_in_a_row_up_to_hpls_limit():
    assert hpcc.solve_list([2000, 4000], 3) == [2000, 2000, 2000, 4000, 4000, 4000]
    assert len(hpcc.solve_list([2000, 4000], 10)) == hpcc.MAX_HPL_PROBLEMS
    with pytest.raises(ValueError, match="2 HPL size\\(s\\) x 11 solve\\(s\\) = 22 problems, more than the 20"):
        hpcc.solve_list([2000, 4000], 11)


def test_the_solves_of_one_size_combine_into_total_work_over_total_time():
    def solve(n, seconds, gflops):
        return hpcc.HplResult(n, 192, 1, 1, seconds, gflops, "WR11C2R4", 0.003, "PASSED")

    # Two solves of N = 2000 (5.33 GFLOP each) at 80 and 40 GFLOP/s took 1/15 s and 2/15 s: 10.67 GFLOP in
    # 0.2 s is 53.3 GFLOP/s, not the arithmetic mean 60.
    combined = hpcc.combined_by_size([solve(2000, 0.07, 80.0), solve(4000, 0.5, 85.0), solve(2000, 0.13, 40.0)])
    assert list(combined) == [2000, 4000]
    assert combined[2000] == (pytest.approx(160 / 3), pytest.approx(0.1))
    assert combined[4000] == (85.0, 0.5)


def test_the_best_solve_of_each_size_is_its_highest_printed_rate():
    def solve(n, gflops):
        return hpcc.HplResult(n, 192, 1, 1, 0.1, gflops, "WR11C2R4", 0.003, "PASSED")

    # A burst that slowed two of three solves of N = 2000 leaves the third's 80 GFLOP/s as the size's best.
    best = hpcc.best_by_size([solve(2000, 61.5), solve(4000, 85.0), solve(2000, 80.0), solve(2000, 70.25)])
    assert best == {2000: 80.0, 4000: 85.0}
    assert list(best) == [2000, 4000]


def test_a_run_with_fewer_solves_than_asked_fails_naming_the_size():
    # The saved file solved N = 2000 and 3000 once each.
    with pytest.raises(WorkloadFailed, match="fewer HPL solves than asked: N=2000 1 of 2, N=3000 1 of 2"):
        hpcc.check_output(hpcc.parse_output(REAL_OUTPUT), [2000, 3000], solves=2)
    with pytest.raises(WorkloadFailed, match="HPL at N=2000 printed a rate of 0.0 GFLOP/s"):
        hpcc.check_output(hpcc.parse_output(REAL_OUTPUT.replace("4.343e+01", "0.000e+00")), [2000, 3000])


def test_sizes_times_solves_past_hpls_limit_are_a_usage_error_before_anything_runs():
    process, _ = run_module("micro_cpu", "--check-args", "--hpl-n", "2000,4000", "--hpl-solves", "11")
    assert process.returncode == 2
    assert "--hpl-n with --hpl-solves: 2 HPL size(s) x 11 solve(s) = 22 problems" in process.stderr
    process, _ = run_module("micro_cpu", "--check-args", "--hpl-n", "2000,4000", "--hpl-solves", "10")
    assert (process.returncode, process.stderr) == (0, "")


def test_the_input_file_has_the_sizes_the_block_size_and_a_1x1_grid():
    lines = hpcc.input_text([2000, 5000], 192).splitlines()
    assert lines[4].split()[0] == "2" and lines[5].split()[:2] == ["2000", "5000"]
    assert (lines[6].split()[0], lines[7].split()[0]) == ("1", "192")
    assert (lines[10].split()[0], lines[11].split()[0]) == ("1", "1")  # P, Q
    assert lines[31].startswith("#####") and len(lines) == 36  # line 32 is HPL's separator


def test_the_blas_is_the_real_file_behind_libblas_so_3(tmp_path):
    # ldd's answer for hpcc on Debian 12 (the addresses vary), and the alternatives' symlink chain.
    target = tmp_path / "openblas-pthread" / "libblas.so.3"
    target.parent.mkdir()
    target.write_text("")
    (tmp_path / "libblas.so.3").symlink_to(target)
    ldd = (
        "\tlinux-vdso.so.1 (0x00007ffc)\n"
        f"\tlibblas.so.3 => {tmp_path}/libblas.so.3 (0x00007f0fe8a77000)\n"
        "\tlibmpi.so.40 => /lib/x86_64-linux-gnu/libmpi.so.40 (0x00007f0fe8900000)\n"
    )
    library = hpcc.linked_library("/usr/bin/hpcc", "libblas.so.3", ldd)
    assert library == str(target)
    assert hpcc.blas_name(library) == "openblas-pthread"
    assert hpcc.blas_name("/usr/lib/x86_64-linux-gnu/blas/libblas.so.3") == "reference"
    assert hpcc.linked_library("/usr/bin/hpcc", "libblas.so.3", "\tlibblas.so.3 => not found\n") is None


def environment(total_gib, limit_gib=None):
    limit = None if limit_gib is None else int(limit_gib * GIB)
    return {"memory_total_bytes": int(total_gib * GIB), "memory_limit_bytes": limit}


def test_auto_sizes_are_the_studys_that_fit_in_half_the_memory_or_the_cgroup_limit():
    assert cli.resolve_hpl_sizes("auto", environment(24))[0] == [2000, 5000, 10000, 15000, 20000, 30000]
    assert cli.resolve_hpl_sizes("auto", environment(64))[0] == list(cli.STUDY_HPL_SIZES)
    sizes, chosen = cli.resolve_hpl_sizes("auto", environment(24, limit_gib=4))
    assert sizes == [2000, 5000, 10000, 15000]
    assert "memory limit of 4.3 GB (cgroup)" in chosen
    with pytest.raises(WorkloadFailed, match="not even the study's smallest size 2000 fits"):
        cli.resolve_hpl_sizes("auto", environment(0.03))


def test_an_hpl_size_that_does_not_fit_says_how_much_it_needs_and_what_fits():
    assert cli.resolve_hpl_sizes([2000, 30000], environment(24)) == ([2000, 30000], "--hpl-n")
    with pytest.raises(WorkloadFailed) as failed:
        cli.resolve_hpl_sizes([2000, 45000], environment(24))
    assert str(failed.value) == (
        "--hpl-n 45000 needs 16.2 GB for its matrix (45000^2 doubles), more than 50% of this instance's "
        "25.8 GB of memory (MemTotal); pick N <= 40000"
    )


@pytest.mark.parametrize("value", ["2000,abc", "0", "-5", "", "2000,,3000"])
def test_hpl_sizes_must_be_auto_or_positive_integers(value):
    with pytest.raises(argparse.ArgumentTypeError, match="expected comma-separated positive integers \\(or auto\\)"):
        cli.hpl_sizes(value)
    assert cli.hpl_sizes("3000, 2000") == [3000, 2000]
    with pytest.raises(argparse.ArgumentTypeError, match="each value once"):
        cli.hpl_sizes("3000,2000,3000")


def test_a_non_number_hpl_size_is_a_usage_error_before_anything_runs():
    process, records = run_module("micro_cpu", "--hpl-n", "2000,big")
    assert (process.returncode, records) == (2, [])
    assert "argument --hpl-n: expected comma-separated positive integers (or auto)" in process.stderr


def test_a_huge_hpl_size_fails_at_run_start_with_what_fits():
    process, records = run_module("micro_cpu", "--hpl-n", "10000000", "--threads", 1)
    record = only_record(process, records)
    assert (process.returncode, record["status"], record["metrics"]) == (1, "failed", [])
    assert record["error"].startswith("--hpl-n 10000000 needs 800000.0 GB for its matrix")
    assert "pick N <= " in record["error"]


# HPCG's report format (HPCG 3.1's HPCG-Benchmark_3.1_<date>.txt: "Section::Key=value" lines), written for
# this test: CONSTRUCTED from the documented format, not a saved run, since no host here has HPCG.
CONSTRUCTED_HPCG_REPORT = """\
HPCG-Benchmark
version=3.1
Release date=March 28, 2019
Machine Summary=
Machine Summary::Distributed Processes=1
Machine Summary::Threads per processes=2
Global Problem Dimensions=
Global Problem Dimensions::Global nx=32
Global Problem Dimensions::Global ny=32
Global Problem Dimensions::Global nz=32
Benchmark Time Summary=
Benchmark Time Summary::Total=61.25
Final Summary=
Final Summary::HPCG result is VALID with a GFLOP/s rating of=2.71828
Final Summary::HPCG 2.4 rating for historical reasons is=2.8
Final Summary::Results are valid but execution time (sec) is=61.25
Final Summary::Official results execution time (sec) must be at least=1800
"""


def test_hpcg_rating_and_summary_come_from_its_report():
    result = hpcg.parse_report(CONSTRUCTED_HPCG_REPORT)
    assert result.gflops == 2.71828
    summary = result.summary_metadata()
    assert summary["version"] == "3.1"
    assert summary["Machine Summary::Threads per processes"] == "2"
    assert summary["Global Problem Dimensions::Global nx"] == "32"


def test_an_hpcg_result_that_is_not_valid_fails_with_its_verdict():
    invalid = CONSTRUCTED_HPCG_REPORT.replace(
        "Final Summary::HPCG result is VALID with a GFLOP/s rating of=2.71828", "Final Summary::HPCG result is=INVALID."
    )
    with pytest.raises(WorkloadFailed, match=r"did not report a VALID result: Final Summary::HPCG result is=INVALID\."):
        hpcg.parse_report(invalid)


@pytest.mark.parametrize("value", ["15", "20", "0", "x"])
def test_hpcg_grid_sizes_are_multiples_of_8_from_16(value):
    with pytest.raises(argparse.ArgumentTypeError, match="multiple of 8 of at least 16"):
        hpcg.grid_size(value)
    assert hpcg.grid_size("104") == 104


def test_hpcg_without_xhpcg_is_a_skipped_record_that_says_how_to_get_it():
    # As `python -m workloads.micro_cpu` runs, with xhpcg found nowhere (whether or not this machine has it).
    hidden = (
        "import sys; from workloads.micro_cpu import cli, hpcg; hpcg.find = lambda: None;"
        " sys.exit(cli.main(['--suite', 'hpcg', '--threads', '1']))"
    )
    process = subprocess.run(
        [sys.executable, "-c", hidden], cwd=REPO_ROOT, env=ENV, capture_output=True, text=True, timeout=300
    )
    records = records_of(process.stdout)
    record = only_record(process, records)
    assert (process.returncode, record["status"], record["metrics"]) == (0, "skipped", [])
    assert record["labels"] == {"workload": "micro_cpu", "suite": "hpcg", "threads": 1}
    assert "no distribution package exists" in record["error"] and "micro_tools_hpcg: true" in record["error"]


@needs_hpcc
def test_a_real_hpcc_run_reports_hpl_per_size_dgemm_stream_and_the_ratio_to_the_fp64_peak():
    process, records = run_module("micro_cpu", "--hpl-n", "1000,1500", "--hpl-solves", 2, "--threads", 2)
    record = only_record(process, records)
    assert (process.returncode, record["status"]) == (0, "ok"), process.stderr
    assert record["labels"] == {"workload": "micro_cpu", "suite": "hpcc", "threads": 2}
    by_size = {}
    for entry in record["metrics"]:
        assert entry["metric"] in METRICS and entry["unit"] == METRICS[entry["metric"]].unit
        if "labels" in entry:
            by_size.setdefault(entry["labels"]["hpl_n"], {})[entry["metric"]] = entry["value"]
    assert sorted(by_size) == [1000, 1500]
    values = metric_values(record)
    peak = values["gemm_peak_fp64"]
    for figures in by_size.values():
        assert figures["hpl_gflops"] > 0 and figures["hpl_time"] >= 0
        assert figures["hpl_gemm_ratio"] == pytest.approx(figures["hpl_gflops"] / peak)
    assert values["dgemm_gflops"] > 0 and values["star_dgemm_gflops"] > 0
    assert values["stream_triad"] > 0
    metadata = record["metadata"]
    assert metadata["hpl_sizes"] == [1000, 1500] and metadata["hpl_sizes_chosen"] == "--hpl-n"
    assert metadata["hpcc_version"] and metadata["tool_versions"]["hpcc"]
    assert metadata["blas"] and metadata["blas_library"].endswith("libblas.so.3")
    assert metadata["peak_source"].startswith("measured") and metadata["peak_gemm"] in ("mm", "conv1x1")
    # Each size solved twice, in a row; its figures are the two solves' combined rate and mean time, and the
    # faster solve's rate.
    runs = metadata["hpl_runs"]
    assert metadata["hpl_solves"] == 2 and [run["n"] for run in runs] == [1000, 1000, 1500, 1500]
    assert [run["check"] for run in runs] == ["PASSED"] * 4
    for size, first in ((1000, 0), (1500, 2)):
        pair = runs[first : first + 2]
        assert by_size[size]["hpl_gflops"] == pytest.approx(2 / sum(1 / run["gflops"] for run in pair))
        assert by_size[size]["hpl_time"] == pytest.approx(sum(run["time"] for run in pair) / 2)
        assert by_size[size]["hpl_gflops_best"] == max(run["gflops"] for run in pair)


def _hpcc_replaced(monkeypatch, run_hpcc):
    """micro_cpu's hpcc body with no hpcc installed: ``run_hpcc`` in place of hpcc.run, and its tool lookups faked."""
    monkeypatch.setattr(cli.tools, "require", lambda names: {"hpcc": "/usr/bin/hpcc"})
    monkeypatch.setattr(cli.tools, "versions", lambda names: {"hpcc": "1.5.0"})
    monkeypatch.setattr(cli.hpcc, "blas_metadata", lambda path: {})
    monkeypatch.setattr(cli.hpcc, "run", run_hpcc)


def test_a_duet_side_starts_hpcc_only_once_its_partner_is_at_the_start_line(tmp_path, monkeypatch):
    """Both sides of a duet pair start hpcc together, so that their HPL solves overlap: the side marks its arrival
    and waits for its partner's mark (workloads/common/duet.py) before hpcc, and its record says how long."""
    import threading
    from types import SimpleNamespace

    from workloads.common import duet

    started = []

    def fake_hpcc(sizes, threads, nb, path, solves=1):
        started.append({"partner there": (tmp_path / "side1").exists(), "own mark": (tmp_path / "side0").exists()})
        return hpcc.parse_output(REAL_OUTPUT), REAL_OUTPUT

    monkeypatch.setenv(duet.DIR_ENV, str(tmp_path))
    monkeypatch.setenv(duet.SIDE_ENV, "0")
    _hpcc_replaced(monkeypatch, fake_hpcc)
    partner = threading.Timer(0.5, (tmp_path / "side1").write_text, args=("4321",))  # arrives half a second late
    partner.start()
    args = SimpleNamespace(hpl_n=[2000, 3000], threads=1, hpl_nb=192, hpl_solves=1, peak_gflops=0)
    run = SimpleNamespace(metadata={"memory_total_bytes": 8 * GIB})
    try:
        outcome = cli._hpcc_body(args, run)
    finally:
        partner.cancel()
    assert started == [{"partner there": True, "own mark": True}]
    assert run.metadata["duet_start"]["partner_arrived"] is True
    assert run.metadata["duet_start"]["waited_seconds"] >= 0.4
    assert {entry["metric"] for entry in outcome.metrics} >= {"hpl_gflops", "hpl_time"}


def test_outside_a_duet_pair_hpcc_starts_at_once_and_the_record_has_no_start_line(monkeypatch):
    from types import SimpleNamespace

    from workloads.common import duet

    monkeypatch.delenv(duet.DIR_ENV, raising=False)
    monkeypatch.delenv(duet.SIDE_ENV, raising=False)
    _hpcc_replaced(monkeypatch, lambda *_args, **_kwargs: (hpcc.parse_output(REAL_OUTPUT), REAL_OUTPUT))
    run = SimpleNamespace(metadata={"memory_total_bytes": 8 * GIB})
    cli._hpcc_body(SimpleNamespace(hpl_n=[2000, 3000], threads=1, hpl_nb=192, hpl_solves=1, peak_gflops=0), run)
    assert "duet_start" not in run.metadata


def test_check_args_checks_what_is_static_and_leaves_the_memory_to_the_instance():
    # The controller's memory is not the instance's: a size too big for this machine passes --check-args.
    process, records = run_module("micro_cpu", "--check-args", "--hpl-n", "10000000", "--suite", "hpcc")
    assert (process.returncode, process.stdout, process.stderr, records) == (0, "", "", [])
    process, _ = run_module("micro_cpu", "--check-args", "--hpl-n", "auto", "--hpcg-size", "20")
    assert process.returncode == 2 and "argument --hpcg-size: expected a multiple of 8" in process.stderr
