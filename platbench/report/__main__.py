"""``python -m platbench.report``."""

import sys

from platbench.report.command import main

sys.exit(main())
