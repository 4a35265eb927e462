"""micro_mem: memory bandwidth (STREAM from an HPC Challenge run) and latency (a pointer chase).

Run ``python -m workloads.micro_mem --help`` for the options.
"""

import sys

from .cli import main

sys.exit(main())
