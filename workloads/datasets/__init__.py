"""Training data in the formats the real datasets are published in.

Each module reads the real files unchanged and, run as ``python -m workloads.datasets.<name> --out DIR``,
writes a small learnable stand-in in exactly the same format (no download is ever attempted).
"""
