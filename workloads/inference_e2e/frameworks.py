"""The framework an app runs on, sized to the cell's threads and seeded. Import only after set_thread_env."""

import random


def setup(framework, threads, seed):
    """Size the framework's thread pools to ``threads`` (one inter-op thread, as cnn_train and small_models do)
    and seed it; returns its version."""
    import numpy as np

    random.seed(seed)
    np.random.seed(seed)
    if framework == "tensorflow":
        import keras
        import tensorflow as tf

        # Both must be set before TensorFlow runs its first op.
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(1)
        keras.utils.set_random_seed(seed)
        return tf.__version__
    import torch

    torch.set_num_threads(threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(seed)
    return torch.__version__


def thread_pools(framework):
    """The framework's own thread pools as it reports them, and the threads this process runs: a cell whose
    time differs between platforms shows here whether the framework ran the threads it was given."""
    import os

    if framework == "tensorflow":
        import tensorflow as tf

        pools = {
            "intra_op": tf.config.threading.get_intra_op_parallelism_threads(),
            "inter_op": tf.config.threading.get_inter_op_parallelism_threads(),
        }
    else:
        import torch

        pools = {"intra_op": torch.get_num_threads(), "inter_op": torch.get_num_interop_threads()}
    return {**pools, "process_threads": len(os.listdir("/proc/self/task"))}


class DeviceUnavailable(Exception):
    pass


def resolve_device(framework, requested):
    """ "cpu" or "cuda": auto is cuda when the framework sees a GPU (the plan decides what is visible: a CPU
    cell sees none); DeviceUnavailable when cuda is asked for and there is none."""
    if framework == "tensorflow":
        import tensorflow as tf

        available = bool(tf.config.list_logical_devices("GPU"))
    else:
        import torch

        available = torch.cuda.is_available()
    if requested == "auto":
        return "cuda" if available else "cpu"
    if requested == "cuda" and not available:
        raise DeviceUnavailable(f"{framework} sees no CUDA GPU on this machine")
    return requested
