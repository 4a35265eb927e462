"""inference_e2e: the end-to-end inference jobs of Samani, Amini Salehi (2022) under MLPerf loadgen (Offline).

Run ``python -m workloads.inference_e2e --help`` for the options.
"""

from ..common.harness import exit_after_record
from .cli import main

# The process ends as soon as the record is out (no framework teardown): see harness.exit_after_record.
exit_after_record(main())
