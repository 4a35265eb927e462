"""dl_tools: the deep-learning tools benchmark of Xu, Shi, Chu (2017), seconds per batch on real-format data.

Run ``python -m workloads.dl_tools --help`` for the options.
"""
