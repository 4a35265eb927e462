"""A magnum cluster driver for a cloud without orchestration (no Heat, no Cluster API).

magnum 23 ships no cluster driver: its Heat drivers are gone and the remaining ones
(magnum-cluster-api, magnum-capi-helm) need a Kubernetes management cluster. Without any driver,
magnum refuses every cluster template. This one accepts Kubernetes on Fedora CoreOS VMs, so
magnum's own validation of templates and cluster requests runs for real (image and its
``os_distro``, keypair, external network, flavors, network driver), and every cluster it is asked
to build fails with a reason that says why. Deleting a cluster removes its records.
"""

from magnum.conductor.handlers.common import cert_manager
from magnum.drivers.common import driver
from magnum.objects import fields

NO_ORCHESTRATION = (
    "platbench test cloud: magnum has no orchestration here (no Heat, no Cluster API), "
    "so the cluster's servers cannot be built; the template and the request were validated"
)


class NoOrchestrationDriver(driver.Driver):
    @property
    def provides(self):
        return [{"server_type": "vm", "os": "fedora-coreos", "coe": "kubernetes"}]

    def create_cluster(self, context, cluster, cluster_create_timeout):
        # magnum's conductor turns the exception into CREATE_FAILED with this status_reason.
        raise RuntimeError(NO_ORCHESTRATION)

    def delete_cluster(self, context, cluster):
        """Nothing was built: the periodic status sync below removes the records."""

    def update_cluster_status(self, context, cluster, use_admin_ctx=False):
        if cluster.status != fields.ClusterStatus.DELETE_IN_PROGRESS:
            return
        cert_manager.delete_certificates_from_cluster(cluster, context=context)
        # The cluster's row goes first: its master_count is read from its nodegroups, and a cluster listed
        # between the nodegroups' removal and its own would have none, which magnum-api refuses to show
        # ("Invalid input for field/attribute master_count", HTTP 400, for every `coe cluster list`).
        nodegroups = list(cluster.nodegroups)
        cluster.destroy()
        for nodegroup in nodegroups:
            nodegroup.destroy()

    def _refuse(self, *args, **kwargs):
        raise NotImplementedError(NO_ORCHESTRATION)

    update_cluster = upgrade_cluster = resize_cluster = _refuse
    create_federation = update_federation = delete_federation = _refuse
    create_nodegroup = update_nodegroup = delete_nodegroup = _refuse
