"""micro_net: TCP throughput (iperf3) and small-message round trips between two instances of one platform.

Run ``python -m workloads.micro_net --help`` for the options.
"""

import sys

from .cli import main

sys.exit(main())
