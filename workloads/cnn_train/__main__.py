from ..common.harness import exit_after_record
from .cli import main

# The process ends as soon as the record is out (no framework teardown): see harness.exit_after_record.
exit_after_record(main())
