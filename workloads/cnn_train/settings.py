"""What the CLI accepts and the defaults it fills in; no framework imports here."""

from typing import NamedTuple


class ModelDefaults(NamedTuple):
    batch_size: int
    image_size: int
    min_image_size: int  # the smallest input the architecture can shrink down to 1x1


# Lin et al. 2018: batch per device 32 (InceptionV3), 32 (ResNet-50), 512 (AlexNet); NHWC; SGD.
MODELS = {
    "tiny": ModelDefaults(batch_size=32, image_size=32, min_image_size=4),
    "alexnet": ModelDefaults(batch_size=512, image_size=227, min_image_size=67),
    "resnet50": ModelDefaults(batch_size=32, image_size=224, min_image_size=32),
    "inception3": ModelDefaults(batch_size=32, image_size=299, min_image_size=75),
}
FRAMEWORK_BACKENDS = {"tensorflow": "tf_backend", "torch": "torch_backend"}
DATA_SOURCES = ("synthetic", "real")
DATA_FORMATS = ("auto", "jpeg", "tfrecord")
# float32 is the studies' arithmetic; bfloat16 (mixed precision: bf16 compute, fp32 weights and
# loss) only when asked for, e.g. to see what AMX or tensor cores give.
DTYPES = ("float32", "bfloat16")
OPTIMIZERS = ("sgd",)
SGD_LEARNING_RATE = 0.01
SGD_MOMENTUM = 0.9
# single: one process on one device. ps: one process, TensorFlow's CentralStorageStrategy: variables
# on the CPU, one replica per GPU (or --cpu-workers logical CPU devices). distributed: N ranks of
# torch DistributedDataParallel or tf.distribute.MultiWorkerMirroredStrategy, possibly on several machines.
MODES = ("single", "ps", "distributed")
DEFAULT_CPU_WORKERS = 2
DEFAULT_NET_TIMEOUT = 600.0  # seconds a rendezvous or a collective may wait for the other ranks
DEFAULT_LAUNCH_TIMEOUT = 3600.0  # seconds a local launch may take, all ranks together

# --steps auto: the timed part lasts at least this long (the report's validity rule, platbench/validity.py), its steps
# worked out from a probe of PROBE_SECONDS (at least PROBE_MIN_STEPS, at most PROBE_MAX_STEPS) after the warmup.
AUTO_STEPS = "auto"
DEFAULT_AUTO_SECONDS = 10.0
PROBE_SECONDS = 1.0
PROBE_MIN_STEPS = 2
PROBE_MAX_STEPS = 50
# The steps chosen cover the target with this margin, so a timed part a little faster than the probe still lasts it.
AUTO_MARGIN = 1.1
