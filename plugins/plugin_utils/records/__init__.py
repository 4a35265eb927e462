# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""What a cell leaves: the record and its samples (records), the cell's outcome (outcome), why it failed in words
(failures), what the record says of the harness (harness_marks), and the modes of the files written (file_modes).

Nothing is re-exported here: import the module itself.
"""
