# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""An experiment as the user wrote it, and the campaign planned from it once: the file found, loaded and
checked (experiment_spec), its fields (inject, idle_cores, instances' own in cells/several), the matrix of cells
(matrix) with each cell's Scenario (scenario), their order (schedule), the workload parameters checked (params_check,
workload_args), and the campaign's plan file (experiment_plan, plan_file).

Nothing is re-exported here: import the module itself.
"""
