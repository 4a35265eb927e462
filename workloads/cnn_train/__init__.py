"""cnn_train: image-classification training throughput (Lin et al. 2018's workload).

Synthetic data (one batch in memory) or an ImageNet-layout directory (--data real); one
process (--mode single), one instance's devices around a parameter server (--mode ps), or
1 PS + N workers (--mode distributed). Run ``python -m workloads.cnn_train --help``.
"""
