"""``platbench reproduce STUDY``: a study's findings (studies/STUDY.yml) run on this lab until each is decided.

- findings.py: a findings file, read and validated (its schema: studies/findings.schema.yml);
- lab.py: what the inventory's runner hosts offer (cores, GPUs, KVM...), against what a finding needs;
- planning.py: the campaigns the expressible findings need, shared where alike, found in the results store;
- relations.py: a finding's relation evaluated on a campaign's samples: its quantity, interval and verdict;
- page.py: the reproduction page (text, HTML and the paper's figures);
- command.py: the command itself.
"""
