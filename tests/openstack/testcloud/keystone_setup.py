"""Run by the test cloud's venv python (it has openstacksdk): the service project, the service users
with the `admin` and `service` roles (keystonemiddleware requires `service` on service tokens), and the
catalog. Reads its plan as JSON on stdin; prints nothing secret."""

import json
import sys

import openstack


def main():
    plan = json.load(sys.stdin)
    conn = openstack.connect(
        auth_url=plan["auth_url"],
        username="admin",
        password=plan["admin_password"],
        project_name="admin",
        user_domain_name="Default",
        project_domain_name="Default",
        region_name=plan["region"],
    )
    identity = conn.identity
    default = identity.find_domain("default")
    service_project = identity.find_project("service", domain_id=default.id) or identity.create_project(
        name="service", domain_id=default.id
    )
    # keystone's bootstrap makes both roles in recent releases; older ones lack `service`.
    roles = [identity.find_role(name) or identity.create_role(name=name) for name in ("admin", "service")]
    for service in plan["services"]:
        user = identity.find_user(service["user"], domain_id=default.id) or identity.create_user(
            name=service["user"], password=service["password"], domain_id=default.id
        )
        for role in roles:
            identity.assign_project_role_to_user(service_project, user, role)
        if service.get("type"):
            catalog_entry = identity.create_service(name=service["name"], type=service["type"])
            for interface in ("public", "internal", "admin"):
                identity.create_endpoint(
                    service_id=catalog_entry.id, interface=interface, url=service["url"], region_id=plan["region"]
                )


if __name__ == "__main__":
    main()
