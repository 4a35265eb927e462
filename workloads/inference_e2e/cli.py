"""Command line, timed Offline run and result record of inference_e2e (Samani, Amini Salehi 2022).

The study times the whole batch of an app's requests, end to end and per phase (pre-processing,
inference, post-processing), under MLPerf loadgen's Offline scenario; an inference-only run feeds
tensors pre-processed before timing, as its DLBS runs did.
"""

import os
import shutil
import tempfile
import time

from ..common.args import non_negative_int, positive_int
from ..common.harness import FlopCount, Outcome, WorkloadFailed
from ..common.record import metric
from ..common.workload import Workload
from ..datasets.base import DatasetError
from .apps.base import APPS, FRAMEWORKS, get_app
from .loadgen_logs import parse_detail, parse_summary, verdict
from .settings import (
    DEFAULT_MIN_DURATION_MS,
    DEVICES,
    LOG_FILES,
    MLPERF_OFFLINE_MIN_DURATION_MS,
    MLPERF_OFFLINE_MIN_SAMPLES,
    OFFLINE,
    TIMINGS,
    WORKLOAD,
)


def _arguments(parser):
    add = parser.add_argument
    add(
        "--app",
        choices=APPS,
        required=True,
        help="ic: JPEG images, ResNet-50 (TensorFlow); rs: Criteo TSV rows, DLRM (PyTorch); "
        "sr: WAV files, RNN-T (PyTorch); nlp: SQuAD JSON, BERT",
    )
    add("--data-dir", required=True, help="folder holding the app's requests in their published format")
    add("--requests", type=positive_int, help="requests served, the first ones of the set (default: the app's)")
    add("--batch-size", type=positive_int, help="requests per inference batch (default: the app's, at most --requests)")
    add("--model-size", help="the model's size, one of the app's (default: the app's first)")
    add(
        "--framework",
        choices=FRAMEWORKS,
        help="the framework the model runs on (default: the app's own; ic runs on torch too, with the same "
        "ResNet-50 v1.5 written in PyTorch)",
    )
    add(
        "--timing",
        choices=TIMINGS,
        default="e2e",
        help="e2e: every phase inside the timed run; inference_only: requests pre-processed before timing and "
        "their tensors fed, only inference timed, no post-processing (default e2e)",
    )
    add("--device", choices=DEVICES, default="auto", help="auto: cuda when the app's framework sees a GPU, else cpu")
    add(
        "--min-duration-ms",
        type=non_negative_int,
        help="loadgen's minimum test duration; a shorter run is INVALID in loadgen's verdict, still recorded "
        f"(default {DEFAULT_MIN_DURATION_MS}: the request count decides, and the run is scaled-down; "
        f"{MLPERF_OFFLINE_MIN_DURATION_MS}, MLPerf's, with --mlperf-minimums)",
    )
    add(
        "--mlperf-minimums",
        action="store_true",
        help="hold the run to MLPerf's minimums for the app's benchmark (Offline: "
        f"{MLPERF_OFFLINE_MIN_DURATION_MS // 1000} s and its sample count: "
        + ", ".join(f"{count} for {name}" for name, count in MLPERF_OFFLINE_MIN_SAMPLES.items())
        + "): --requests and --min-duration-ms default to them and fewer is refused. A run that meets them is "
        "VALID or INVALID as loadgen says; one below them, with or without this flag, is recorded scaled-down",
    )
    add(
        "--log-dir",
        help="folder loadgen writes its logs into, kept (default: a temporary one, removed after the run; the "
        "record keeps both logs either way)",
    )


def _check_app(parser, args, _allowed_cpus):
    """The app's own checks and defaults; the app is kept as ``args.served_app``.

    With --check-args the data directory is checked when it exists here (a run's loader checks it as it reads)."""
    try:
        app = get_app(args.app)
    except ImportError as error:
        parser.error(f"--app {args.app}: the app's module cannot be imported: {error}")
    if args.framework not in (None, *app.frameworks):
        parser.error(f"--framework {args.framework}: app {args.app} runs on " + " or ".join(app.frameworks) + " only")
    app = app.on(args.framework)
    args.framework = app.framework
    _resolve_minimums(parser, args, app)
    if args.batch_size is None:
        args.batch_size = min(app.default_batch_size, args.requests)
    elif args.batch_size > args.requests:
        parser.error(f"--batch-size {args.batch_size} is larger than --requests {args.requests}: lower it")
    if args.model_size is None:
        args.model_size = app.sizes[0]
    elif args.model_size not in app.sizes:
        parser.error(
            f"--model-size {args.model_size!r} is not a size of app {args.app}: choose from "
            + ", ".join(repr(size) for size in app.sizes)
        )
    if args.timing == "inference_only" and not app.can_separate_phases:
        parser.error(
            f"--timing inference_only: app {args.app} cannot separate its pre-processing from its inference; "
            "use --timing e2e"
        )
    if args.check_args and os.path.exists(args.data_dir):
        try:
            app.validate(args.data_dir, args.requests)
        except DatasetError as error:
            parser.error(f"--data-dir: {error}")
    args.served_app = app


def _resolve_minimums(parser, args, app):
    """--requests and --min-duration-ms filled in; with --mlperf-minimums, MLPerf's minimums by default and
    anything below them refused, naming the app, its benchmark and the minimum."""
    minimums = app.mlperf_minimums(OFFLINE)
    if args.mlperf_minimums and minimums is None:
        parser.error(f"--mlperf-minimums: app {args.app} re-runs no MLPerf benchmark; leave --mlperf-minimums out")
    if args.requests is None:
        args.requests = minimums.min_samples if args.mlperf_minimums else app.default_requests
    if args.min_duration_ms is None:
        args.min_duration_ms = minimums.min_duration_ms if args.mlperf_minimums else DEFAULT_MIN_DURATION_MS
    if not args.mlperf_minimums:
        return
    why = f"MLPerf's {OFFLINE} minimum for app {args.app} (MLPerf's {minimums.benchmark})"
    instead = "or leave --mlperf-minimums out (the run is then recorded scaled-down)"
    if args.requests < minimums.min_samples:
        parser.error(
            f"--requests {args.requests} is below {why}: {minimums.min_samples} samples; give --requests "
            f"{minimums.min_samples} or more (and as many requests in --data-dir), {instead}"
        )
    if args.min_duration_ms < minimums.min_duration_ms:
        parser.error(
            f"--min-duration-ms {args.min_duration_ms} is below {why}: {minimums.min_duration_ms} ms; give "
            f"{minimums.min_duration_ms} or more, {instead}"
        )


def _own_labels(args):
    """The run's labels; device (when auto) is known only once the framework is up."""
    return {
        "framework": args.framework,
        "app": args.app,
        "model_size": args.model_size,
        "batch_size": args.batch_size,
        "requests": args.requests,
        "timing": args.timing,
        "data": args.served_app.dataset,
        "device": None if args.device == "auto" else args.device,
    }


def _serve(args, run):
    """The harness body: the framework, the requests, the model, then loadgen's timed Offline run."""
    app = args.served_app
    # The framework only after the thread variables: its math libraries read them when they load.
    from . import frameworks

    framework_version = frameworks.setup(app.framework, args.threads, args.seed)
    try:
        device = frameworks.resolve_device(app.framework, args.device)
    except frameworks.DeviceUnavailable as error:
        SPEC.usage_error(f"--device {args.device}: {error}; use --device cpu or auto")
    run.labels.update(device=device)
    from .offline import preprocess, run_offline

    requests, data_load = SPEC.load_data(app.load, args.data_dir, args.requests)
    model = app.build_model(args.model_size, args.seed, device)
    prepared = None
    if args.timing == "inference_only":
        started = time.perf_counter()
        prepared = [preprocess(app, request) for request in requests]
        run.metadata["untimed_preprocess_s"] = time.perf_counter() - started
    # Warm-up on the first batch, untimed: graph tracing and first allocations are no request's cost.
    warm = prepared[: args.batch_size] if prepared else [preprocess(app, r) for r in requests[: args.batch_size]]
    started = time.perf_counter()
    app.infer(model, warm)
    run.metadata.update(
        warmup_s=time.perf_counter() - started,
        framework_version=framework_version,
        # After the warm-up, when the pools have started: a platform's slower cell shows whether it ran more.
        framework_threads=frameworks.thread_pools(app.framework),
        model=app.describe(model),
    )

    log_dir = args.log_dir or tempfile.mkdtemp(prefix="platbench-loadgen-")
    try:
        offline = run_offline(app, model, requests, args.batch_size, log_dir, args.min_duration_ms, prepared)
        logs = {}
        for role, name in LOG_FILES.items():
            with open(os.path.join(log_dir, name), encoding="utf-8", errors="replace") as stream:
                logs[role] = stream.read()
    finally:
        if not args.log_dir:
            shutil.rmtree(log_dir, ignore_errors=True)
    summary = parse_summary(logs["summary"], os.path.join(log_dir, LOG_FILES["summary"]))
    detail = parse_detail(logs["detail"], os.path.join(log_dir, LOG_FILES["detail"]))
    if detail["samples"] != len(requests) or len(set(offline.issued)) != len(requests):
        raise WorkloadFailed(
            f"loadgen issued {detail['samples']} samples ({len(set(offline.issued))} distinct requests), "
            f"{len(requests)} were asked for: the run did not serve each request once"
        )
    for role, name in LOG_FILES.items():
        run.keep_file(name, logs[role])
    state, reasons, minimums = verdict(
        summary["result"],
        summary["reasons"],
        detail["settings"].get("min_duration_ms", args.min_duration_ms),
        detail["samples"],
        app.mlperf_minimums(OFFLINE),
    )
    run.metadata["loadgen"] = {
        # One field, three states (settings.py): VALID, INVALID or scaled-down; loadgen's own verdict beside it.
        "result": state,
        "reasons": reasons,
        "loadgen_result": summary["result"],
        "loadgen_reasons": summary["reasons"],
        "mlperf_minimums": {"scenario": OFFLINE, **minimums},
        # Loadgen's own clock: the run from the issue of its query to its last sample's completion.
        "span": detail["span"],
        "recommendations": summary["recommendations"],
        "settings": {"requested": offline.settings, "effective": detail["settings"]},
        "queries": detail["queries"],
        "samples_per_query": detail["samples_per_query"],
        "errors": detail["errors"],
        # The campaign keeps both logs per cell (metadata.kept_files has their paths there).
        "logs": dict(LOG_FILES),
        "log_dir": os.path.abspath(args.log_dir) if args.log_dir else None,
    }
    run.metadata["results"] = offline.results
    metrics = _metrics(offline, summary, detail, data_load)
    features = warm[0]
    flops = FlopCount(
        lambda: (_forward_flops(app, model, features), device),
        args.peak_gflops,
        app.framework,
        "float32",
        args.threads,
        passes=1,  # inference: one forward pass a request
        rate_metric="inference_throughput",  # MFU of the inference phase, the model's own work
    )
    return Outcome(metrics, flops)


def _forward_flops(app, model, features):
    flops = app.forward_flops(model, features)
    if flops is None:
        raise LookupError(f"app {app.name} does not count its forward FLOPs")
    return flops


def _metrics(offline, summary, detail, data_load):
    count = offline.phases.count
    inference = sum(offline.phases.seconds["inference"])
    return [
        *offline.phases.metrics(),
        # Requests over the loadgen-timed run: from the first issued query to the last completed sample.
        metric("throughput", count / offline.run_time, "samples/sec"),
        metric("inference_throughput", count / inference, "samples/sec"),
        metric("loadgen_samples_per_sec", summary["samples_per_sec"], "samples/sec"),
        metric("loadgen_queries", detail["samples"], "samples"),
        metric("data_load", data_load, "s"),
    ]


SPEC = Workload(
    name=WORKLOAD,
    description="Serve one app's requests under MLPerf loadgen (Offline scenario), each request's "
    "pre-processing, inference and post-processing timed, and print one PLATBENCH_RESULT line.",
    arguments=_arguments,
    validate=_check_app,
    own_labels=_own_labels,
    metadata=lambda args: {"data_dir": os.path.abspath(args.data_dir)},
    body=_serve,
    not_checked="--threads against the CPUs, --device cuda against the GPUs, and a --data-dir that does not exist "
    "here: it is read where the job runs",
)
main, parse_args, build_parser = SPEC.main, SPEC.parse_args, SPEC.build_parser
