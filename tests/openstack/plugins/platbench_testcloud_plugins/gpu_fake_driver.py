"""nova's fake hypervisor, sized like a small GPU host: 8 shared vCPUs, 4 dedicated CPUs (PCPU, for
``hw:cpu_policy=dedicated`` flavors), 16 GiB, 200 GB, 2 NVIDIA H100.

nova loads its compute driver as ``nova.virt.<compute_driver>`` only (nova/virt/driver.py), so a
driver outside nova's tree is not loadable by name. ``nova_compute.main`` (the
``platbench-nova-compute`` script) registers this module as ``nova.virt.platbench_gpu`` before
it runs nova-compute, and nova.conf says ``compute_driver = platbench_gpu.TwoGpuFakeDriver``;
nova's own tree stays untouched.
"""

import nova.conf
from nova.virt import fake
from oslo_serialization import jsonutils

NVIDIA_VENDOR_ID = "10de"
H100_PRODUCT_ID = "2330"
GPU_ADDRESSES = ("0000:81:00.0", "0000:82:00.0")


class TwoGpuFakeDriver(fake.FakeDriverWithoutFakeNodes):
    """The single-node fake driver (its node identity survives restarts) with two GPUs."""

    vcpus = 8
    memory_mb = 16384
    local_gb = 200

    def get_available_resource(self, nodename):
        resources = super().get_available_resource(nodename)
        if resources:
            resources["pci_passthrough_devices"] = jsonutils.dumps(
                [
                    {
                        "address": address,
                        "product_id": H100_PRODUCT_ID,
                        "vendor_id": NVIDIA_VENDOR_ID,
                        "dev_type": "type-PCI",
                        "dev_id": "pci_" + address.replace(":", "_").replace(".", "_"),
                        "parent_addr": None,
                        "numa_node": None,
                        "label": "label_10de_2330",
                    }
                    for address in GPU_ADDRESSES
                ]
            )
        return resources

    def update_provider_tree(self, provider_tree, nodename, allocations=None):
        # nova schedules pinned flavors on PCPU, which only a driver that reads [compute]
        # cpu_dedicated_set reports (libvirt does); the fake one reports VCPU alone.
        super().update_provider_tree(provider_tree, nodename, allocations)
        dedicated = nova.conf.CONF.compute.cpu_dedicated_set
        if dedicated:
            inventory = dict(provider_tree.data(nodename).inventory)
            inventory["PCPU"] = {
                "total": len(dedicated),
                "min_unit": 1,
                "max_unit": len(dedicated),
                "step_size": 1,
                "allocation_ratio": 1.0,
                "reserved": 0,
            }
            provider_tree.update_inventory(nodename, inventory)
