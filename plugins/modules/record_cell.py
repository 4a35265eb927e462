#!/usr/bin/python
# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
# The work is done by the action plugin of the same name, on the controller;
# this file carries its documentation, as Ansible expects for action-only modules.

from __future__ import annotations

DOCUMENTATION = r"""
---
module: record_cell
short_description: Decide one experiment cell's outcome and hand its samples to the platbench results callback
description:
  - Runs on the controller. Parses the C(PLATBENCH_RESULT) line of the workload's output, validates it, decides
    whether the cell is ok or failed, and returns the finished samples (cell labels, host environment, runtime and
    the workload's own metadata layered as in the design) in RV(platbench_samples). The C(platbench.lab.results)
    callback only appends them to C(samples.jsonl) and keeps C(run.json).
  - A cell is failed when O(error) or O(failure) is given, when its output holds no valid result line, or when the
    workload reported C(status=failed); it is then one sample of metric C(failed) with the error and the tail of
    the output.
  - Never fails the play for a failed cell, so that the campaign goes on. A failed cell shows as a warning on this
    task and in the callback's summary at the end of the run.
version_added: "0.1.0"
author: platbench developers (@platbench)
options:
  cell:
    description: One cell of the expanded experiment (C(id), C(scenario), C(labels)).
    type: dict
    required: true
  campaign:
    description: C(name), C(results_dir) and the C(experiment) definition.
    type: dict
    required: true
  plan:
    description:
      - The cell's plan (C(platbench.lab.cell_plan)). With it, the cell's output, runtime and, where the engine says
        the workload failed (a Kubernetes Job ended C(Failed)), its error come from O(results), mapped by the plan's
        kind in Python (C(plugins/plugin_utils/placements/)), on top of the plan's C(runtime) (what was asked).
    type: dict
    default: {}
    version_added: "0.9.0"
  engines:
    description:
      - The runner's container engines as C(platbench.lab.platform_status) found them (C(platform_run_engines)),
        per engine its C(version); Docker's is recorded as C(docker_version) in the host's environment (C(run.json)
        and every sample's metadata), a container cell's own engine version in its runtime.
    type: dict
    default: {}
    version_added: "0.9.0"
  results:
    description:
      - What the kind's placement task file registered, by result name - C(process), C(container), C(guest)
        (C(vm_guest)), C(vcpus), C(k8s_job), C(k8s_pods), C(k8s_log), C(instance), C(instances), C(path),
        C(k8s_instances), C(guests) (each guest's C(vm_guest) of a cell with a guest per instance, by name); empty for
        those it did not run.
      - Omitted, each result is read from the variable its kind declares it in (C(results) of the kind's declaration,
        C(plugins/plugin_utils/placements/<kind>/)).
    type: dict
    version_added: "0.9.0"
  output:
    description:
      - What the workload printed (stdout, and stderr after it).
      - With O(failure) and no O(output), taken from the failed result (C(stdout) or the container's C(Output),
        then C(stderr)).
    type: str
    default: ""
  error:
    description: Why the cell failed, as a message. Wins over O(failure).
    type: str
  failure:
    description:
      - The failed task of a cell, from a C(rescue), turned into a message that names the cause.
      - 'C(task): its name (C(ansible_failed_task.name)); C(result): its result (C(ansible_failed_result)).'
      - 'Causes named: a task timeout (the cell ran past C(platform_run_cell_timeout)); the Docker engine gone
        mid-cell (C(Error connecting), C(Cannot connect to the Docker daemon)), whichever task saw it, the clean-up
        included; a process or container ended by a signal (C(rc) below 0, or C(rc)/C(status) 128+N:
        "killed by SIGKILL, signal 9" and who usually sends it; OOM when Docker reports C(OOMKilled)); a failed
        record the workload printed before it exited; otherwise the task name, C(msg), C(rc) and the last line of
        C(stderr).'
    type: dict
    version_added: "0.4.0"
  runtime:
    description:
      - What the platform did (launcher, cpuset or quota asked, container and image id, rc), when no O(plan) is
        given; with one, added under what the plan and its results say.
    type: dict
    default: {}
attributes:
  check_mode:
    description: Decides and returns the samples as in a real run; the action itself writes nothing.
    support: full
  diff_mode:
    description: Nothing on the host changes, so there is no difference to show.
    support: none
"""

EXAMPLES = r"""
- name: Run and record one cell
  block:
    - name: Run the workload
      ansible.builtin.command:
        argv: "{{ argv }}"
      register: run

    - name: Record the cell
      platbench.lab.record_cell:
        cell: "{{ cell }}"
        campaign: "{{ campaign }}"
        output: "{{ run.stdout }}"
        runtime:
          launcher: taskset
          cpuset_requested: "0-1"
  rescue:
    - name: Record the failed cell, naming its cause
      platbench.lab.record_cell:
        cell: "{{ cell }}"
        campaign: "{{ campaign }}"
        failure:
          task: "{{ ansible_failed_task.name }}"
          result: "{{ ansible_failed_result }}"
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
platbench_status:
  description: C(ok) or C(failed).
  returned: always
  type: str
  sample: failed
platbench_error:
  description: Why the cell failed, or null.
  returned: always
  type: str
  sample: "the workload was killed by SIGKILL (signal 9): the kernel's OOM killer, `docker kill` or the cell timeout"
platbench_samples:
  description:
    - The samples to append to C(samples.jsonl), one per metric, or one sample of metric C(failed) with
      C(metadata.error), C(metadata.output_tail) (the output's last lines) and C(metadata.output_file) (the file of
      RV(platbench_files) that keeps the whole output).
  returned: always
  type: list
  elements: dict
platbench_files:
  description:
    - The files the callback writes under the campaign's results directory before the samples, by path relative to
      it (C(files/<cell folder>/NAME)) - those an ok record keeps (C(metadata.kept_files) names them), or a failed
      cell's whole output (C(failed-output-TIME.log), named by its sample's C(metadata.output_file)).
  returned: always
  type: dict
platbench_env:
  description: Host environment (host, kernel, OS, CPU model, versions), kept in C(run.json).
  returned: always
  type: dict
"""
