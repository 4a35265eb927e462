# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""What the kubernetes role renders and checks (kubernetes_config), and a cell as a Kubernetes Job and what
Kubernetes did with it (job_spec; the k8s_job kind, ../placements/k8s_job/, places it).

Nothing is re-exported here: import the module itself.
"""
