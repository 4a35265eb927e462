# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""What the lab's roles build, decided as data: per CPU architecture (architectures), the GPUs kept by the host or
passed through (gpus), the NVIDIA driver (nvidia_driver), and the names that say what was built from which inputs
(identities).

Nothing is re-exported here: import the module itself.
"""
