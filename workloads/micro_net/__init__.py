"""micro_net: TCP throughput (iperf3) and small-message round trips between two instances of one platform.

Run ``python -m workloads.micro_net --help`` for the client's options and
``python -m workloads.micro_net.peer --help`` for the peer it measures against.
"""
