"""micro_cpu: HPL, DGEMM and STREAM from one HPC Challenge run (Debian's hpcc), or HPCG (Xu et al. 2017).

Run ``python -m workloads.micro_cpu --help`` for the options.
"""
