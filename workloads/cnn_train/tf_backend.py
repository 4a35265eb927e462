"""TensorFlow/Keras 3 training step. Import only after `set_thread_env`."""

import importlib
import os
import time

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
            self.apply_one(variable, gradient, velocity)

    def apply_one(self, variable, gradient, velocity):
        return tf.raw_ops.ResourceApplyKerasMomentum(
            var=variable.handle, accum=velocity.handle, lr=self.learning_rate, grad=gradient, momentum=self.momentum
        )


def configure_threads(args):
    """Before TensorFlow runs its first op (a strategy's construction is one); the same values again are a no-op."""
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)


def multi_worker_strategy(args):
    """MultiWorkerMirroredStrategy from TF_CONFIG; a collective that waits longer than --net-timeout fails."""
    configure_threads(args)
    options = tf.distribute.experimental.CommunicationOptions(timeout_seconds=args.net_timeout)
    return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)


def central_storage_strategy(args):
    """--mode ps: variables on the CPU, one replica per GPU, or args.workers logical CPU devices on a CPU host
    (they share the process's intra-op threads, as tf_cnn_benchmarks' CPU replicas did)."""
    configure_threads(args)
    # Physical devices only: listing logical ones would initialise the runtime before the split below.
    if tf.config.list_physical_devices("GPU"):
        devices = [device.name for device in tf.config.list_logical_devices("GPU")]
    else:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * args.workers)
        devices = [device.name for device in tf.config.list_logical_devices("CPU")]
    return tf.distribute.experimental.CentralStorageStrategy(compute_devices=devices, parameter_device="/cpu:0")


class Trainer:
    """One model, or its replicas under a tf.distribute strategy: next_batch() and step(batch) for the timed loop.

    shard_index/shard_count: which part of the dataset this process reads (each worker of a
    multi-worker run reads its own part). strategy: a tf.distribute strategy whose scope creates
    the model and optimizer, and whose replicas each train on their own batch.
    """

    def __init__(self, args, shard_index=0, shard_count=1, strategy=None):
        configure_threads(args)
        keras.utils.set_random_seed(args.seed)
        # bfloat16: layers compute in bf16, weights, optimizer and loss stay float32.
        keras.mixed_precision.set_global_policy("mixed_bfloat16" if args.dtype == "bfloat16" else "float32")
        self.args = args
        self.strategy = strategy or tf.distribute.get_strategy()  # the default strategy: one replica, no scope
        # The plan decides what is visible (CUDA_VISIBLE_DEVICES): a CPU cell sees no GPU.
        self.device = "/GPU:0" if tf.config.list_logical_devices("GPU") else "/CPU:0"
        # TensorFlow has no events to time a copy with: the copy is made explicit, before the traced
        # step, and waited for; the step's own time still includes it. Under a strategy the strategy copies.
        self.copies = (
            CopyLog("wall clock of an explicit copy of the batch to /GPU:0 before the traced step, waited for")
            if self.device == "/GPU:0" and strategy is None
            else None
        )
        with self.strategy.scope():
            model = build_model(args.model, args.image_size, args.num_classes)
            optimizer = MomentumSGD(model.trainable_variables, SGD_LEARNING_RATE, SGD_MOMENTUM)
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        self.model = model

        def replica_loss(images, labels):
            with tf.GradientTape() as tape:
                loss = loss_fn(labels, model(_as_model_input(images), training=True))
            return loss, tape.gradient(loss, model.trainable_variables)

        @tf.function(jit_compile=False)
        def train_step(images, labels):
            loss, gradients = replica_loss(images, labels)
            optimizer.apply(gradients)
            return loss

        def apply_mean(strategy, gradients):
            """Cross-replica: every replica's gradients averaged, then one update of each variable."""
            variables = [variable.value for variable in optimizer.variables]
            mean = strategy.extended.batch_reduce_to(
                tf.distribute.ReduceOp.MEAN, list(zip(gradients, variables, strict=True))
            )
            for variable, gradient, velocity in zip(variables, mean, optimizer.velocities, strict=True):
                strategy.extended.update(variable, optimizer.apply_one, args=(gradient, velocity), group=False)

        @tf.function(jit_compile=False)
        def distributed_step(images, labels):
            def step_fn(images, labels):
                loss, gradients = replica_loss(images, labels)
                tf.distribute.get_replica_context().merge_call(apply_mean, args=(gradients,))
                return loss

            losses = self.strategy.run(step_fn, args=(images, labels))
            return self.strategy.reduce(tf.distribute.ReduceOp.MEAN, losses, axis=None)

        self._train_step = train_step if strategy is None else distributed_step

        setup_started = time.perf_counter()
        self.stats = None
        # One batch source per replica of this process (several: CentralStorageStrategy over local devices).
        local_replicas = self.strategy.num_replicas_in_sync // shard_count if strategy else 1
        sources = [
            self._batch_source(shard_index * local_replicas + index, shard_count * local_replicas)
            for index in range(local_replicas)
        ]
        if local_replicas == 1:
            self.next_batch = sources[0]
        else:
            distribute = self.strategy.experimental_distribute_values_from_function

            def next_batch():
                batches = [source() for source in sources]
                images = distribute(lambda context: batches[context.replica_id_in_sync_group][0])
                labels = distribute(lambda context: batches[context.replica_id_in_sync_group][1])
                return images, labels

            self.next_batch = next_batch
        # Seconds from the start of data setup to a pipeline ready to be asked for its first batch.
        self.data_setup = time.perf_counter() - setup_started

    def _batch_source(self, shard_index, shard_count):
        """() -> (images, labels): shard `shard_index` of `shard_count` of the data, one batch a call."""
        args = self.args
        if args.data == "real":
            from .input_tf import build_input

            total_batches = args.warmup_steps + args.steps
            next_batch, self.stats = build_input(args.dataset, args, total_batches, shard_index, shard_count)
            return next_batch
        images_np, labels_np = synthetic_batch(
            args.batch_size, args.image_size, args.num_classes, args.seed + shard_index
        )
        # Synthetic data lives where the model runs: no copy is ever timed.
        with tf.device(self.device):
            batch = (tf.identity(tf.constant(images_np)), tf.identity(tf.constant(labels_np)))
        return lambda: batch

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

    def h2d_metrics(self, timed_steps):
        """h2d_time and h2d_bytes of the timed steps on a GPU; nothing on a CPU."""
        return [] if self.copies is None else self.copies.metrics(timed_steps)

    def forward_flops(self):
        """Matrix FLOPs of one image's forward pass, counted from the model's layers."""
        return keras_forward_flops(self.model)

    def metadata(self):
        info = {
            "framework_version": tf.__version__,
            "keras_version": keras.__version__,
            "model_params": self.model.count_params(),
            "onednn": tensorflow_onednn(),
            "tf_function_traces": self._train_step.experimental_get_tracing_count(),
            "replicas": self.strategy.num_replicas_in_sync,
            "device": self.device,
        }
        if self.copies is not None:
            info["h2d_method"] = self.copies.method
        if self.stats is not None:
            info["input"] = self.stats.metadata()
        return info


def build_trainer(args, shard_index=0, shard_count=1, strategy=None):
    return Trainer(args, shard_index, shard_count, strategy)
