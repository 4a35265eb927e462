# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""A cell on its runner host: which cells a host runs and the prechecks (runplan), how big a cell is there (sizing),
its plan (cellplan, whose kind adds its section: ../placements/), several instances of it (several), a duet pair's
sides (duet_pair), micro_net's peer, the Apptainer command lines, the timeout, what an earlier run left (leftovers),
the tools a runner looks for (tool_checks) and the teardown each kind declares (teardown).

Nothing is re-exported here: import the module itself.
"""
