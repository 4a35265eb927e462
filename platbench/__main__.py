"""``python -m platbench``."""

import sys

from platbench.cli import main

sys.exit(main())
