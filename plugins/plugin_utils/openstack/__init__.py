# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""What a campaign creates on an OpenStack cloud (openstack_plan) and what the openstack_deploy role writes for
kolla-ansible (kolla).

Nothing is re-exported here: import the module itself.
"""
