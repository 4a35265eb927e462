"""TensorFlow/Keras 3 training step, compiled once with tf.function. Import only after `set_thread_env`."""

import importlib
import os

from ..common.flops import keras_forward_flops
from ..common.onednn import tensorflow_onednn

# Keras 3 picks its backend when it is imported: TensorFlow first, then keras and the models built on it.
os.environ["KERAS_BACKEND"] = "tensorflow"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
keras = importlib.import_module("keras")
tf = importlib.import_module("tensorflow")
_models = importlib.import_module(".models_tf", __package__)
build_model, trainable_parameters = _models.build_model, _models.trainable_parameters


def build_trainer(args, spec, num_outputs):
    """Returns (step, metadata, costs): step(inputs, targets) trains on one batch and returns its
    loss; costs(inputs) gives (forward FLOPs of one sample like ``inputs``, the device it trains on)."""
    # Both must be set before TensorFlow runs its first op.
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    keras.utils.set_random_seed(args.seed)
    # The plan decides what is visible (CUDA_VISIBLE_DEVICES): a CPU cell sees no GPU.
    device = "/GPU:0" if tf.config.list_logical_devices("GPU") else "/CPU:0"

    model = build_model(args.net, num_outputs)
    optimizer = keras.optimizers.SGD(
        learning_rate=spec.learning_rate, momentum=spec.momentum, global_clipnorm=spec.clip_norm
    )
    optimizer.build(model.trainable_variables)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function(jit_compile=False)
    def train_step(inputs, targets):
        with tf.GradientTape() as tape:
            loss = loss_fn(targets, model(inputs, training=True))
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables, strict=False))
        return loss

    def step(inputs, targets):
        # Host arrays become tensors here, inside the timed batch; .numpy() waits for the step to finish.
        return float(train_step(tf.convert_to_tensor(inputs), tf.convert_to_tensor(targets)).numpy())

    def metadata():
        return {
            "framework_version": tf.__version__,
            "keras_version": keras.__version__,
            "model_params": trainable_parameters(model),
            "onednn": tensorflow_onednn(),
            "tf_function_traces": train_step.experimental_get_tracing_count(),
            "device": device,
        }

    def costs(inputs):
        sequence_length = inputs.shape[1] if inputs.ndim == 2 and inputs.dtype.kind in "iu" else None
        return keras_forward_flops(model, sequence_length), device

    return step, metadata, costs
