"""Benchmark (not a test): what cnn_train's own training loop costs against a minimal hand-written one.

In one process, with the same model, batch, thread count and synthetic data, it times
alternately (a) a minimal hand-written TensorFlow training loop (one tf.function step,
called back to back, synchronised once at the end) and (b) cnn_train's own trainer and
timed loop (workloads.cnn_train.tf_backend.Trainer driven by training.run_steps, imported and
called in-process), and prints both in images/sec and their ratio. Target: cnn_train
>= 0.99 of the hand loop.

    python benchmarks/harness_tax.py [--model tiny] [--image-size 32] [--batch-size 32]
                                     [--threads 1] [--steps 50] [--warmup-steps 20] [--repeats 20]
"""

import argparse
import importlib
import os
import statistics
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Run as `python benchmarks/harness_tax.py`: the workloads package is found from the repo root.
sys.path.insert(0, REPO_ROOT)
cli = importlib.import_module("workloads.cnn_train.cli")
training = importlib.import_module("workloads.cnn_train.training")
MODELS = importlib.import_module("workloads.cnn_train.settings").MODELS
set_thread_env = importlib.import_module("workloads.common").set_thread_env


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=MODELS, default="tiny")
    parser.add_argument("--image-size", type=int, help="default: 32 for tiny, else the model's default")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=50, help="timed steps per repeat")
    parser.add_argument("--warmup-steps", type=int, default=20)
    parser.add_argument(
        "--repeats", type=int, default=20, help="alternating (a, b) pairs; many short ones resist drift"
    )
    args = parser.parse_args(argv)
    if args.image_size is None:
        args.image_size = 32 if args.model == "tiny" else MODELS[args.model].image_size
    return args


def main(argv=None):
    bench = parse_args(argv)
    cnn_argv = {
        "--framework": "tensorflow",
        "--model": bench.model,
        "--image-size": bench.image_size,
        "--batch-size": bench.batch_size,
        "--threads": bench.threads,
        "--warmup-steps": bench.warmup_steps,
        "--steps": bench.steps,
    }
    cnn_args = cli.parse_args([str(item) for pair in cnn_argv.items() for item in pair])
    set_thread_env(bench.threads)
    from workloads.cnn_train import tf_backend  # sets KERAS_BACKEND before keras loads

    # (b) cnn_train's trainer; built first: it sets TensorFlow's thread pools before any op runs.
    trainer = tf_backend.build_trainer(cnn_args)

    import keras
    import tensorflow as tf

    from workloads.cnn_train.data import synthetic_batch
    from workloads.cnn_train.models_tf import build_model
    from workloads.cnn_train.settings import SGD_LEARNING_RATE, SGD_MOMENTUM

    # (a) the minimal hand-written loop: same model, optimizer, loss, batch and threads.
    keras.utils.set_random_seed(0)
    model = build_model(bench.model, bench.image_size, 1000)
    optimizer = keras.optimizers.SGD(learning_rate=SGD_LEARNING_RATE, momentum=SGD_MOMENTUM)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    images_np, labels_np = synthetic_batch(bench.batch_size, bench.image_size, 1000, 0)
    images, labels = tf.constant(images_np), tf.constant(labels_np)

    @tf.function(jit_compile=False)
    def train_step(images, labels):
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(images, training=True))
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables, strict=False))
        return loss

    def hand_loop(steps):
        started = time.perf_counter()
        for _ in range(steps):
            loss = train_step(images, labels)
        loss.numpy()
        return bench.batch_size * steps / (time.perf_counter() - started)

    def cnn_train_loop(steps):
        started = time.perf_counter()
        run = training.run_steps(trainer.next_batch, trainer.step, 0, steps)
        wall = bench.batch_size * steps / (time.perf_counter() - started)
        recorded = bench.batch_size * len(run.step_times) / sum(run.step_times)  # the record's throughput
        return wall, recorded

    hand_loop(bench.warmup_steps)
    cnn_train_loop(bench.warmup_steps)
    hand, wall, recorded = [], [], []
    for repeat in range(bench.repeats):
        # Alternate which goes first, so that drift (turbo, a neighbour's load) hits both alike.
        order = ("a", "b") if repeat % 2 == 0 else ("b", "a")
        for which in order:
            if which == "a":
                hand.append(hand_loop(bench.steps))
            else:
                w, r = cnn_train_loop(bench.steps)
                wall.append(w)
                recorded.append(r)
    median = statistics.median
    # Each (a, b) pair ran back to back: the median of the pairs' ratios cancels slow drift.
    pair_ratio = median(b / a for a, b in zip(hand, wall, strict=False))
    print(
        f"model {bench.model} {bench.image_size}px, batch {bench.batch_size}, threads {bench.threads}, "
        f"{bench.steps} steps x {bench.repeats} alternating repeats, TensorFlow {tf.__version__}"
    )
    print(f"(a) hand-written loop         : {median(hand):9.1f} images/sec (median; max {max(hand):.1f})")
    print(f"(b) cnn_train, wall clock     : {median(wall):9.1f} images/sec (median; max {max(wall):.1f})")
    print(f"(b) cnn_train, its own record : {median(recorded):9.1f} images/sec (median; sum of timed steps)")
    print(f"ratio b/a, medians            : {median(wall) / median(hand):.4f}")
    print(
        f"ratio b/a, median of pairs    : {pair_ratio:.4f}  "
        f"target >= 0.99: {'met' if pair_ratio >= 0.99 else 'NOT met'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
