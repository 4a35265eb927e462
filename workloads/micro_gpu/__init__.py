"""micro_gpu: the GPU micro-benchmarks of Xu 2017 (transfers, SGEMM, 2D convolution, histograms, transposes).

Run ``python -m workloads.micro_gpu --help`` for the options.
"""
