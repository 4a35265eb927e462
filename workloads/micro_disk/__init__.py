"""micro_disk: the disk micro-benchmarks of Xu 2017 (dd with fdatasync, ioping, optionally fio), per platform.

Run ``python -m workloads.micro_disk --help`` for the options.
"""
