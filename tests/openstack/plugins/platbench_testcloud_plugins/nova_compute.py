"""``platbench-nova-compute``: nova-compute with our GPU fake driver loadable as ``nova.virt.platbench_gpu``."""

import sys


def main():
    # nova.cmd.compute first: importing it selects nova's process backend before any other nova import.
    from nova.cmd import compute

    from platbench_testcloud_plugins import gpu_fake_driver

    sys.modules["nova.virt.platbench_gpu"] = gpu_fake_driver
    return compute.main()
