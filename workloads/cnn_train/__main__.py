from ..common.harness import exit_after_record, private_tempdir
from .cli import main

# The process ends as soon as the record is out (no framework teardown): see harness.exit_after_record.
private_tempdir()  # the frameworks' temporary files in a directory of the run's own, removed at its end
exit_after_record(main())
