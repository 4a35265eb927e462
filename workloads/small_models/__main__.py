"""small_models: the small PyTorch jobs of Chopra, Ranjan, Sinha (2022), real, user and system time of 1 epoch.

Run ``python -m workloads.small_models --help`` for the options.
"""

import sys

from .cli import main

sys.exit(main())
