"""Benchmark (not a test): what inference_e2e's machinery costs, on IC (ResNet-50 v1.5, TensorFlow).

In one process, with the same model object, requests, batch size and thread count, it times alternately:

(a) the inference phase: inference_e2e's batched inference as its Offline SUT runs it with tensors fed
    (``--timing inference_only``: apps/ic.py's infer per batch, timed per batch), against a minimal
    hand-written predict loop over the same batches stacked beforehand (one tf.function of
    ``model(x, training=False)``, each batch's logits brought back to host memory). Target: the phase's
    throughput >= 0.97 of the hand loop's.
(b) loadgen and the phase timers: a whole end-to-end Offline run (offline.run_offline: loadgen's QSL and
    SUT, every request's phases timed, loadgen's logs written) against a plain loop doing the same work with
    neither loadgen nor a timer: pre-process a batch's requests, infer the batch, post-process its outputs.
    Target: the run takes less than 1% longer than the plain loop. Differencing two runs of seconds each is at
    the mercy of the host's drift, so the run's own accounting is printed too: the time it spent outside the
    requests' timed phases (loadgen's set-up and logs, the SUT's completion calls and bookkeeping), measured
    within the same run.

Repeats alternate which goes first, so that drift (turbo, a neighbour's load) hits both alike; each figure is
the median of the pairs' ratios, with the mean and its 95% confidence interval (Student's t): the verdict is
"met" or "NOT met" when the interval lies on one side of the target, "inconclusive" when it straddles it.

    python benchmarks/inference_tax.py [--model-size resnet50] [--requests 128] [--batch-size 32]
                                       [--threads 1] [--repeats 5] [--data-dir DIR]
"""

import argparse
import importlib
import os
import statistics
import sys
import tempfile
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Run as `python benchmarks/inference_tax.py`: the workloads package is found from the repo root.
sys.path.insert(0, REPO_ROOT)
ic = importlib.import_module("workloads.inference_e2e.apps.ic")
imagenet = importlib.import_module("workloads.datasets.imagenet")
set_thread_env = importlib.import_module("workloads.common").set_thread_env
TARGET_RATIO = 0.97
TARGET_OVERHEAD = 0.01
IMAGE_SIZE = 320  # shorter side of the generated JPEGs, about an ImageNet photo's (decoding costs as much)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-size", choices=ic.APP.sizes, default="resnet50")
    parser.add_argument("--requests", type=int, default=128, help="images served per repeat and variant")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5, help="alternating pairs of each comparison")
    parser.add_argument("--data-dir", help="an ImageNet-layout folder (default: JPEGs generated in a temporary one)")
    return parser.parse_args(argv)


def interval(values):
    """(mean, low, high): the mean of ``values`` and its 95% confidence interval (Student's t)."""
    from scipy import stats

    mean = statistics.fmean(values)
    half = stats.t.ppf(0.975, len(values) - 1) * statistics.stdev(values) / len(values) ** 0.5
    return mean, mean - half, mean + half


def verdict(low, high, target, higher_is_better):
    """met / NOT met / inconclusive for an interval against a target."""
    if (low >= target) if higher_is_better else (high < target):
        return "met"
    if (high < target) if higher_is_better else (low >= target):
        return "NOT met"
    return "inconclusive"


def main(argv=None):
    bench = parse_args(argv)
    set_thread_env(bench.threads)
    frameworks = importlib.import_module("workloads.inference_e2e.frameworks")
    version = frameworks.setup("tensorflow", bench.threads, 0)  # before any op: TensorFlow's thread pools
    import numpy as np
    import tensorflow as tf

    offline = importlib.import_module("workloads.inference_e2e.offline")

    app = ic.APP
    data_dir = bench.data_dir
    if data_dir is None:
        data_dir = tempfile.mkdtemp(prefix="inference-tax-")
        imagenet.generate(data_dir, bench.requests, 10, IMAGE_SIZE)
    requests = app.load(data_dir, bench.requests)
    model = app.build_model(bench.model_size, 0, "cpu")
    features = [offline.preprocess(app, request) for request in requests]
    starts = range(0, len(features), bench.batch_size)
    stacked = [np.stack(features[start : start + bench.batch_size]) for start in starts]
    signature = [tf.TensorSpec([None, ic.IMAGE_SIZE, ic.IMAGE_SIZE, 3], tf.float32)]
    predict = tf.function(lambda images: model.keras(images, training=False), input_signature=signature)
    log_dir = tempfile.mkdtemp(prefix="inference-tax-loadgen-")
    count = len(requests)

    def hand_loop():
        started = time.perf_counter()
        for images in stacked:
            predict(tf.constant(images)).numpy()
        return count / (time.perf_counter() - started)

    def inference_phase():
        run = offline.run_offline(app, model, requests, bench.batch_size, log_dir, 0, features)
        return count / sum(run.phases.seconds["inference"])

    def plain_loop():
        started = time.perf_counter()
        for start in starts:
            batch = [app.preprocess(request.data) for request in requests[start : start + bench.batch_size]]
            for output in app.infer(model, batch):
                app.postprocess(output)
        return time.perf_counter() - started

    def loadgen_run():
        started = time.perf_counter()
        run = offline.run_offline(app, model, requests, bench.batch_size, log_dir, 0)
        phases = sum(sum(seconds) for seconds in run.phases.seconds.values())
        return time.perf_counter() - started, run.run_time, phases

    # Warm-up: traces, allocations, the page cache of the JPEGs.
    hand_loop(), inference_phase(), plain_loop(), loadgen_run()
    hand, phase, plain, whole, timed, outside = [], [], [], [], [], []
    for repeat in range(bench.repeats):
        for which in ("hand", "phase") if repeat % 2 == 0 else ("phase", "hand"):
            (hand if which == "hand" else phase).append(hand_loop() if which == "hand" else inference_phase())
        for which in ("plain", "loadgen") if repeat % 2 == 0 else ("loadgen", "plain"):
            if which == "plain":
                plain.append(plain_loop())
            else:
                wall, run_time, phases = loadgen_run()
                whole.append(wall)
                timed.append(run_time)
                outside.append(wall / phases - 1)
        print(
            f"repeat {repeat}: (a) hand {hand[-1]:.2f}, phase {phase[-1]:.2f} images/sec; "
            f"(b) plain {plain[-1]:.3f} s, loadgen run {whole[-1]:.3f} s (timed {timed[-1]:.3f} s)",
            flush=True,
        )
    median = statistics.median
    ratios = [b / a for a, b in zip(hand, phase, strict=True)]
    overheads = [b / a - 1 for a, b in zip(plain, whole, strict=True)]
    timed_overheads = [b / a - 1 for a, b in zip(plain, timed, strict=True)]
    print(
        f"\nIC {bench.model_size}, {count} requests, batch {bench.batch_size}, threads {bench.threads}, "
        f"{bench.repeats} alternating repeats, TensorFlow {version}"
    )
    print(f"(a) hand-written predict loop   : {median(hand):9.2f} images/sec (median)")
    print(f"(a) inference_e2e's inference   : {median(phase):9.2f} images/sec (median)")
    mean, low, high = interval(ratios)
    print(
        f"(a) ratio                       : {median(ratios):.4f} (median of pairs); mean {mean:.4f}, 95% CI "
        f"[{low:.4f}, {high:.4f}]  target >= {TARGET_RATIO}: {verdict(low, high, TARGET_RATIO, True)}"
    )
    print(f"(b) plain loop, end to end      : {median(plain):9.3f} s (median)")
    print(f"(b) loadgen run, whole call     : {median(whole):9.3f} s (median; loadgen's set-up and logs included)")
    print(f"(b) loadgen run, its timed part : {median(timed):9.3f} s (median; first issue to last completion)")
    print(
        f"(b) outside the phases, same run: {100 * median(outside):+.2f}% of the phases' time (median; max "
        f"{100 * max(outside):+.2f}%): loadgen's set-up, logs, completion calls and the SUT's bookkeeping"
    )
    for name, values in (("whole call", overheads), ("timed part", timed_overheads)):
        mean, low, high = interval(values)
        print(
            f"(b) overhead, {name}        : {100 * median(values):+.2f}% (median of pairs); mean {100 * mean:+.2f}%, "
            f"95% CI [{100 * low:+.2f}%, {100 * high:+.2f}%]  target < 1%: "
            f"{verdict(low, high, TARGET_OVERHEAD, False)}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
