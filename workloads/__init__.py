"""platbench workloads: benchmark programs that each print one result record.

Run as ``python -m workloads.<name>`` with the parent directory on PYTHONPATH.
"""
