"""TensorFlow/Keras 3 training step. Import only after `set_thread_env`."""

import importlib
import os
import time

import numpy as np

from ..common.flops import keras_forward_flops
from ..common.onednn import tensorflow_onednn
from .data import synthetic_batch
from .h2d import CopyLog, no_copy
from .settings import SGD_LEARNING_RATE, SGD_MOMENTUM

# Keras 3 picks its backend when it is imported: TensorFlow first, then keras and the models built on it.
os.environ["KERAS_BACKEND"] = "tensorflow"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
keras = importlib.import_module("keras")
tf = importlib.import_module("tensorflow")
build_model = importlib.import_module(".models_tf", __package__).build_model


def _as_model_input(images):
    """uint8 batches from disk become floats in [-1, 1]; synthetic float batches pass unchanged.

    Runs inside the traced step, so on a GPU the (uint8) host-to-device copy and the
    conversion are part of the timed step.
    """
    if images.dtype == tf.uint8:
        return tf.cast(images, tf.float32) / 127.5 - 1.0
    return images


class MomentumSGD:
    """Keras' SGD with momentum (m = momentum * m - lr * g; w = w + m), each variable updated by
    TensorFlow's fused ResourceApplyKerasMomentum kernel in one pass. Keras 3's own optimizer
    runs several generic ops per variable instead: about 7% of a ResNet-50 step on 2 CPU threads."""

    def __init__(self, variables, learning_rate, momentum):
        self.variables = list(variables)
        self.learning_rate, self.momentum = learning_rate, momentum
        self.velocities = [
            tf.Variable(tf.zeros(variable.shape, variable.dtype), trainable=False) for variable in self.variables
        ]

    def apply(self, gradients):
        for variable, velocity, gradient in zip(self.variables, self.velocities, gradients, strict=False):
            tf.raw_ops.ResourceApplyKerasMomentum(
                var=variable.handle, accum=velocity.handle, lr=self.learning_rate, grad=gradient, momentum=self.momentum
            )


class Trainer:
    """One model replica: next_batch() and step(batch) for the timed loop, gradients/params for a PS.

    shard_index/shard_count: which part of the dataset this replica reads (workers of a
    parameter-server run each read their own part).
    """

    def __init__(self, args, shard_index=0, shard_count=1):
        # Both must be set before TensorFlow runs its first op.
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(1)
        keras.utils.set_random_seed(args.seed)
        # bfloat16: layers compute in bf16, weights, optimizer and loss stay float32.
        keras.mixed_precision.set_global_policy("mixed_bfloat16" if args.dtype == "bfloat16" else "float32")
        self.args = args
        # The plan decides what is visible (CUDA_VISIBLE_DEVICES): a CPU cell sees no GPU.
        self.device = "/GPU:0" if tf.config.list_logical_devices("GPU") else "/CPU:0"
        # TensorFlow has no events to time a copy with: the copy is made explicit, before the traced
        # step, and waited for; the step's own time still includes it.
        self.copies = (
            CopyLog("wall clock of an explicit copy of the batch to /GPU:0 before the traced step, waited for")
            if self.device == "/GPU:0"
            else None
        )

        model = build_model(args.model, args.image_size, args.num_classes)
        optimizer = MomentumSGD(model.trainable_variables, SGD_LEARNING_RATE, SGD_MOMENTUM)
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        self.model = model
        trainable = model.trainable_variables
        sizes = [int(np.prod(variable.shape)) for variable in trainable]

        @tf.function(jit_compile=False)
        def train_step(images, labels):
            with tf.GradientTape() as tape:
                loss = loss_fn(labels, model(_as_model_input(images), training=True))
            gradients = tape.gradient(loss, model.trainable_variables)
            optimizer.apply(gradients)
            return loss

        @tf.function(jit_compile=False)
        def gradient_step(images, labels):
            with tf.GradientTape() as tape:
                loss = loss_fn(labels, model(_as_model_input(images), training=True))
            gradients = tape.gradient(loss, trainable)
            return loss, tf.concat([tf.reshape(gradient, [-1]) for gradient in gradients], axis=0)

        @tf.function(jit_compile=False)
        def assign_params(flat):
            for variable, part in zip(trainable, tf.split(flat, sizes), strict=False):
                variable.assign(tf.reshape(part, variable.shape))

        @tf.function(jit_compile=False)
        def flat_params():
            return tf.concat([tf.reshape(variable, [-1]) for variable in trainable], axis=0)

        self._train_step, self._gradient_step = train_step, gradient_step
        self._assign_params, self._flat_params = assign_params, flat_params

        setup_started = time.perf_counter()
        self.stats = None
        if args.data == "real":
            from .input_tf import build_input

            total_batches = args.warmup_steps + args.steps
            self.next_batch, self.stats = build_input(args.dataset, args, total_batches, shard_index, shard_count)
        else:
            images_np, labels_np = synthetic_batch(
                args.batch_size, args.image_size, args.num_classes, args.seed + shard_index
            )
            # Synthetic data lives where the model runs: no copy is ever timed.
            with tf.device(self.device):
                batch = (tf.identity(tf.constant(images_np)), tf.identity(tf.constant(labels_np)))
            self.next_batch = lambda: batch
        # Seconds from the start of data setup to a pipeline ready to be asked for its first batch.
        self.data_setup = time.perf_counter() - setup_started

    def _to_device(self, images, labels):
        """Host batches go to the GPU here, timed; on a CPU, or already on the GPU, they pass unchanged."""
        if self.copies is None:
            return images, labels
        if "GPU" in images.device:
            self.copies.add(no_copy, 0)
            return images, labels
        started = time.perf_counter()
        with tf.device(self.device):
            on_device = tf.identity(images), tf.identity(labels)
        tf.test.experimental.sync_devices()
        seconds = time.perf_counter() - started
        nbytes = sum(int(tf.size(tensor)) * tensor.dtype.size for tensor in (images, labels))
        self.copies.add(lambda: seconds, nbytes)
        return on_device

    def step(self, batch):
        """Trains once on the batch; .numpy() waits for the step to finish, so the caller's timer sees real work."""
        return float(self._train_step(*self._to_device(*batch)).numpy())

    def gradients(self, batch):
        """(loss, every trainable variable's gradient as one flat float32 numpy vector)."""
        loss, flat = self._gradient_step(*self._to_device(*batch))
        return float(loss.numpy()), flat.numpy()

    def get_params(self):
        return self._flat_params().numpy()

    def set_params(self, flat):
        self._assign_params(tf.constant(flat))

    def h2d_metrics(self, timed_steps):
        """h2d_time and h2d_bytes of the timed steps on a GPU; nothing on a CPU."""
        return [] if self.copies is None else self.copies.metrics(timed_steps)

    def forward_flops(self):
        """Matrix FLOPs of one image's forward pass, counted from the model's layers."""
        return keras_forward_flops(self.model)

    def metadata(self):
        traces = (
            self._train_step.experimental_get_tracing_count() or self._gradient_step.experimental_get_tracing_count()
        )
        info = {
            "framework_version": tf.__version__,
            "keras_version": keras.__version__,
            "model_params": self.model.count_params(),
            "onednn": tensorflow_onednn(),
            "tf_function_traces": traces,
            "device": self.device,
        }
        if self.copies is not None:
            info["h2d_method"] = self.copies.method
        if self.stats is not None:
            info["input"] = self.stats.metadata()
        return info


def build_trainer(args, shard_index=0, shard_count=1):
    return Trainer(args, shard_index, shard_count)
