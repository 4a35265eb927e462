"""TensorFlow/Keras 3 training step. Import only after `set_thread_env`."""

import os

# Keras 3 must pick TensorFlow; both variables are read at import time.
os.environ["KERAS_BACKEND"] = "tensorflow"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from .data import synthetic_batch  # noqa: E402
from .models_tf import build_model  # noqa: E402
from .settings import SGD_LEARNING_RATE, SGD_MOMENTUM  # noqa: E402


def _onednn_enabled():
    """TensorFlow's own verdict (TF_ENABLE_ONEDNN_OPTS and CPU defaults); private API, so guarded."""
    try:
        from tensorflow.python.util import _pywrap_util_port

        return bool(_pywrap_util_port.IsMklEnabled())
    except (ImportError, AttributeError):
        return None


def build_trainer(args):
    """Returns (step, metadata): step() trains once and returns the loss; metadata() describes the run."""
    # Both must be set before TensorFlow runs its first op.
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    keras.utils.set_random_seed(args.seed)

    model = build_model(args.model, args.image_size, args.num_classes)
    optimizer = keras.optimizers.SGD(learning_rate=SGD_LEARNING_RATE, momentum=SGD_MOMENTUM)
    optimizer.build(model.trainable_variables)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    images_np, labels_np = synthetic_batch(args.batch_size, args.image_size, args.num_classes, args.seed)
    images, labels = tf.constant(images_np), tf.constant(labels_np)

    @tf.function(jit_compile=False)
    def train_step(images, labels):
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(images, training=True))
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        return loss

    def step():
        # .numpy() waits for the step to finish, so the caller's timer sees real work.
        return float(train_step(images, labels).numpy())

    def metadata():
        return {
            "framework_version": tf.__version__,
            "keras_version": keras.__version__,
            "model_params": model.count_params(),
            "onednn": {"enabled": _onednn_enabled()},
            "tf_function_traces": train_step.experimental_get_tracing_count(),
        }

    return step, metadata
