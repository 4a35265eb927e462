"""An ML2 mechanism driver that binds every port to every segment it is offered.

The test cloud runs neutron-server without agents, so no real mechanism driver could bind a
port; nova still needs bound ports (its fake hypervisor plugs nothing).
"""

from neutron_lib import constants
from neutron_lib.api.definitions import portbindings
from neutron_lib.plugins.ml2 import api


class BindEveryPort(api.MechanismDriver):
    def initialize(self):
        """Nothing to set up: there is no backend."""

    def bind_port(self, context):
        for segment in context.segments_to_bind:
            context.set_binding(
                segment[api.ID],
                portbindings.VIF_TYPE_OTHER,
                {},
                status=constants.PORT_STATUS_ACTIVE,
            )
            return
