"""inference_e2e: the end-to-end inference jobs of Samani, Amini Salehi (2022) under MLPerf loadgen (Offline).

Each request is pre-processed, inferred (in batches) and post-processed, each phase timed on its own.
Run ``python -m workloads.inference_e2e --help`` for the options; the apps are in apps/.
"""
