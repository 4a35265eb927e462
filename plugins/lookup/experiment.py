# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
name: experiment
author: platbench developers (@platbench)
version_added: "0.1.0"
short_description: Load, validate and expand a platbench experiment
description:
  - Reads C(NAME.yml) from the experiments directory, deep-merges O(overrides) into it, validates every field
    and returns the experiment with the cells to run under the key C(cells).
  - Bad input fails before any host is touched, with a message that names the file, the field, the bad value
    and the allowed values; an unknown name lists the experiments available.
  - An experiment may list several workloads; what each needs from a cell (a GPU, a network peer) comes from
    C(plugins/module_utils/workload_needs.py); cells that cannot give it are left out and listed in C(dropped),
    and a workload left with no cell stops the plan.
  - The workload parameters are checked by the workload's own parser, on the controller and without training.
    Each distinct command line the cells will run (the scale-up as C(--threads), the cell's C(params), a
    generated dataset's C(--data-dir)) is handed to C(python -m workloads.NAME --check-args ...), in parallel; so are
    the C(dataset) generator's C(args). Every refused value is reported at once, with the parser's own words for
    what is allowed. An unknown C(workload) lists the workloads available.
  - With O(plan_file) it plans nothing. It returns the plan that C(platbench run) planned and wrote to the
    campaign's plan file (C(results/CAMPAIGN/plan.json)), so that a campaign is planned once.
options:
  _terms:
    description:
      - Names of experiments (file names without C(.yml)) in O(experiments_dir), or paths of experiment files (a
        term that ends in C(.yml) or C(.yaml), or holds a C(/); relative to the working directory).
    type: list
    elements: str
    required: true
  experiments_dir:
    description:
      - Directory holding the experiment files.
      - A relative path is taken from the playbook's directory.
      - Defaults to the C(experiments) directory of the platbench.lab collection.
    type: str
  overrides:
    description:
      - Merged into the experiment before validation, mapping by mapping; lists and scalars replace.
      - 'For example V({"repeats": 1, "params": {"steps": 3}}) for a quick run, or V({"platforms": ["bm"]}).'
    type: dict
    default: {}
  size:
    description:
      - A size the experiment file names in its C(sizes) field (for example C(small)), merged in before O(overrides).
      - Empty runs the experiment at the size its file gives.
    type: str
    default: ""
  campaign:
    description:
      - The campaign's name. A C(rounds) schedule without a C(schedule_seed) shuffles its rounds with a seed made from
        it, so that the same campaign, resumed, runs its cells in the same order.
      - Empty uses the experiment's name (the campaign's name when none is given).
    type: str
    default: ""
  plan_file:
    description:
      - A campaign's plan file, written by C(platbench run). The plan is read from it and nothing is planned again;
        O(experiments_dir), O(overrides) and O(size) are not used.
      - The plan file must be of the version this collection reads, and of O(campaign) when one is given.
      - Empty plans the experiment named by the term.
    type: str
    default: ""
    version_added: "0.12.0"
seealso:
  - plugin_type: filter
    plugin: platbench.lab.expand_matrix
"""

EXAMPLES = r"""
- name: Load the smoke experiment, three steps per cell
  ansible.builtin.set_fact:
    platbench_experiment: >-
      {{ lookup('platbench.lab.experiment', 'smoke', overrides={'params': {'steps': 3}}) }}

- name: Show the cells
  ansible.builtin.debug:
    msg: "{{ item.id }}"
  loop: "{{ platbench_experiment.cells }}"

- name: Load an experiment from the project's own directory
  ansible.builtin.set_fact:
    platbench_experiment: >-
      {{ lookup('platbench.lab.experiment', experiment, experiments_dir=playbook_dir ~ '/../experiments') }}
"""

RETURN = r"""
_raw:
  description:
    - One experiment per term, validated and normalized (the dimension fields C(platforms), C(scaleup),
      C(cpu_config), C(processor) are lists; C(description), C(mode) and C(params) have their defaults).
    - C(workload) is a workload name or a list of them (each cell runs one, its C(labels.workload)).
    - C(cells) holds the cells in run order, as returned by P(platbench.lab.expand_matrix#filter).
    - C(dropped) lists the cells left out because their workload cannot run there (a GPU benchmark's CPU
      cells, a network benchmark on a platform the lab gives no peer), one entry per workload and platform
      or processor, with C(reason) and the number of C(cells).
    - C(tools) lists the programs its workloads run (hpcc, ioping...), which the runners' precheck looks for.
  type: list
  elements: dict
"""

import os

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase
from ansible.utils.display import Display
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment import plan_file
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.experiment_plan import (
    COLLECTION_EXPERIMENTS,
    plan_experiment,
)
from ansible_collections.platbench.lab.plugins.plugin_utils.experiment.experiment_spec import ExperimentError

display = Display()


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        experiments_dir = os.path.expanduser(self.get_option("experiments_dir") or COLLECTION_EXPERIMENTS)
        if not os.path.isabs(experiments_dir):
            experiments_dir = os.path.join(self._loader.get_basedir(), experiments_dir)
        experiments_dir = os.path.normpath(experiments_dir)
        overrides = self.get_option("overrides")
        size = self.get_option("size") or None
        campaign = self.get_option("campaign") or None
        planned = self.get_option("plan_file") or None
        if planned:
            return [self._from_plan_file(planned, terms, campaign)]

        experiments = []
        for name in terms:
            try:
                experiment, warnings = plan_experiment(experiments_dir, name, overrides, size, campaign=campaign)
            except ExperimentError as exc:
                raise AnsibleLookupError(str(exc)) from None
            for warning in warnings:
                display.warning(f"experiment {name}: {warning}")
            experiments.append(experiment)
        return experiments

    @staticmethod
    def _from_plan_file(path, terms, campaign):
        """The plan ``platbench run`` wrote, checked to be of this campaign; nothing is planned."""
        if len(terms) > 1:
            raise AnsibleLookupError(f"plan_file {path}: a plan file holds one experiment's plan, not {len(terms)}")
        try:
            plan, planned_for = plan_file.read(path)
        except plan_file.PlanFileError as exc:
            raise AnsibleLookupError(str(exc)) from None
        if campaign and planned_for != campaign:
            raise AnsibleLookupError(
                f"plan file {path}: planned for campaign {planned_for!r}, not {campaign!r}; give that campaign's "
                "own plan file (results/CAMPAIGN/plan.json), or leave platbench_plan_file unset to plan again"
            )
        return plan
