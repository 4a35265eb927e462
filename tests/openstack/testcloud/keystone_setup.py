"""Run by the test cloud's venv python (it has openstacksdk): the service project, the service users
with the `admin` and `service` roles (keystonemiddleware requires `service` on service tokens), the
catalog, and magnum's trustee domain. Reads its plan as JSON on stdin; prints nothing secret."""

import json
import sys

import openstack


def find_or_create(finder, creator, name, **attrs):
    return finder(name, ignore_missing=True, **{k: v for k, v in attrs.items() if k == "domain_id"}) or creator(
        name=name, **attrs
    )


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
    service_project = find_or_create(identity.find_project, identity.create_project, "service", domain_id=default.id)
    roles = [find_or_create(identity.find_role, identity.create_role, name) for name in ("admin", "service")]
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
    trustee = plan["magnum_trustee"]
    domain = identity.find_domain(trustee["domain"]) or identity.create_domain(name=trustee["domain"])
    admin = identity.find_user(trustee["user"], domain_id=domain.id) or identity.create_user(
        name=trustee["user"], password=trustee["password"], domain_id=domain.id
    )
    identity.assign_domain_role_to_user(domain, admin, roles[0])


if __name__ == "__main__":
    main()
