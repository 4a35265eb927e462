"""cnn_train: image-classification training throughput on synthetic data.

Run ``python -m workloads.cnn_train --help`` for the options.
"""
