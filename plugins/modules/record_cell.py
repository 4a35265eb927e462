#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
# The work is done by the action plugin of the same name, on the controller;
# this file carries its documentation, as Ansible expects for action-only modules.

from __future__ import annotations

DOCUMENTATION = r"""
---
module: record_cell
short_description: Hand one experiment cell's outcome to the platbench results callback
description:
  - Runs on the controller. Packages the workload's output, the cell's labels, the campaign
    and the host's environment into the task result, where the C(platbench.lab.results)
    callback turns the C(PLATBENCH_RESULT) line into samples.
  - Never fails the play for a failed cell; give O(error) and the cell is recorded as failed.
version_added: "0.1.0"
author: platbench developers
options:
  cell:
    description: One cell of the expanded experiment (C(id), C(scenario), C(labels)).
    type: dict
    required: true
  campaign:
    description: C(name), C(results_dir) and the C(experiment) definition.
    type: dict
    required: true
  output:
    description: What the workload printed (stdout, and stderr after it).
    type: str
    default: ""
  error:
    description: Why the cell failed, when it did.
    type: str
  runtime:
    description: What the platform did (launcher, cpuset or quota asked, container and image id, rc).
    type: dict
    default: {}
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Record the cell
  platbench.lab.record_cell:
    cell: "{{ cell }}"
    campaign: "{{ campaign }}"
    output: "{{ run.stdout }}"
    runtime:
      launcher: taskset
      cpuset_requested: "0-1"
"""

RETURN = r"""
platbench_cell:
  description: The cell's id, scenario and labels.
  returned: always
  type: dict
platbench_campaign:
  description: Campaign name, absolute results directory and experiment definition.
  returned: always
  type: dict
platbench_output:
  description: The tail of the workload's output.
  returned: always
  type: str
platbench_error:
  description: Why the cell failed, or null.
  returned: always
  type: str
platbench_env:
  description: Host environment (host, kernel, OS, CPU model, versions).
  returned: always
  type: dict
platbench_runtime:
  description: The runtime arguments as given.
  returned: always
  type: dict
"""
