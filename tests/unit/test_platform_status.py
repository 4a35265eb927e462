"""platform_status: which platforms a host can run, and why not, on injected facts."""

from __future__ import annotations

import json

import pytest
from ansible.module_utils.testing import patch_module_args
from ansible_collections.platbench.lab.plugins.module_utils import platforms
from ansible_collections.platbench.lab.plugins.module_utils.readiness import (
    CHECKS,
    platform_status,
    requirement_problem,
    summary,
)
from ansible_collections.platbench.lab.plugins.modules import platform_status as module
from unbuilt import REASON, make_unbuilt

IMAGE = "sha256:" + "1" * 64
OLD_IMAGE = "sha256:" + "2" * 64
KVM_HOST = {"docker_engine": True, "vm_accelerator": "kvm", "libvirt_daemon": True}
GUEST = {"rootfs_id": "r1", "container_image_id": IMAGE}


def answering(image_id=IMAGE):
    """Both container engines answer and hold the workload image ``image_id`` (None: not there)."""
    return {
        "docker": {"answers": True, "version": "26.1.5", "image_id": image_id},
        "podman": {"answers": True, "version": "4.3.1", "image_id": image_id},
    }


def status(facts=None, venv=True, image_id=IMAGE, guest=None, engines=None):
    return platform_status(
        KVM_HOST if facts is None else facts,
        "/opt/platbench",
        venv,
        "platbench/workload:latest",
        image_id,
        "/var/lib/platbench/guest/current.json",
        GUEST if guest is None else guest,
        engines_found=answering(image_id) if engines is None else engines,
    )


def test_a_complete_kvm_host_runs_every_built_platform():
    result = status()
    assert [label for label in platforms.LABELS if result[label]["ready"]] == ["bm", "cn", "pd", "vm", "vmcn"]
    assert result["vm"] == {"ready": True, "reason": "", "skip": False, "accelerator": "kvm", "emulated": False}
    assert "accelerator" not in result["bm"]


def test_every_registry_platform_is_reported_and_unbuilt_ones_say_so(monkeypatch):
    assert list(status()) == list(platforms.LABELS)
    make_unbuilt(monkeypatch, "sg")
    result = status()
    assert not result["sg"]["ready"] and "not built by this release" in result["sg"]["reason"]
    assert REASON in result["sg"]["reason"]


def test_openstack_platforms_are_ready_with_the_campaigns_instances_and_skipped_without():
    without = status()
    for label in platforms.REMOTE:
        assert without[label]["skip"] and not without[label]["ready"]
        assert f"the inventory holds no {label} instance of this campaign" in without[label]["reason"]
        assert "openstack_instances_cloud" in without[label]["reason"]
    with_nova = platform_status(
        KVM_HOST,
        "/opt/platbench",
        True,
        "platbench/workload:latest",
        IMAGE,
        "/var/lib/platbench/guest/current.json",
        GUEST,
        openstack_instances={"nova": ["pb-0123456789-nova-1-vnl-cpu"], "ironic": []},
    )
    assert with_nova["nova"] == {"ready": True, "reason": "", "skip": False}
    assert with_nova["ironic"]["skip"] and with_nova["magnum"]["skip"]


@pytest.mark.parametrize(
    "change, platform, reason",
    [
        (
            {"venv": False},
            "bm",
            "no workload environment at /opt/platbench/venv: run site.yml (role platbench.lab.workload_env)",
        ),
        (
            {"engines": {**answering(), "docker": {"answers": False}}},
            "cn",
            "no Docker engine answers on this host: run site.yml (role platbench.lab.docker) or start dockerd",
        ),
        (
            {"engines": {**answering(), "podman": {"answers": False}}},
            "pd",
            "no Podman engine answers on this host: run site.yml (role platbench.lab.podman)",
        ),
        ({"image_id": None}, "cn", "image platbench/workload:latest is not built: run site.yml"),
        (
            {"engines": {**answering(), "podman": {"answers": True, "version": "4.3.1", "image_id": None}}},
            "pd",
            "image platbench/workload:latest is not built: run site.yml (role platbench.lab.podman)",
        ),
        ({"facts": {**KVM_HOST, "libvirt_daemon": False}}, "vm", "libvirtd does not answer"),
        ({"guest": {}}, "vm", "no guest image at /var/lib/platbench/guest/current.json"),
        ({"guest": {"rootfs_id": "r1"}}, "vmcn", "the guest image carries no container image"),
        (
            {"guest": {**GUEST, "container_image_id": OLD_IMAGE}},
            "vmcn",
            "the guest carries workload image 222222222222, not the current 111111111111: run site.yml",
        ),
    ],
)
def test_each_missing_piece_names_what_to_run(change, platform, reason):
    result = status(**change)
    assert not result[platform]["ready"] and result[platform]["reason"].startswith(reason)
    assert not result[platform]["skip"]


def test_without_kvm_guests_are_emulated_and_without_qemu_skipped():
    tcg = status(facts={**KVM_HOST, "vm_accelerator": "tcg"})
    assert tcg["vm"]["ready"] and tcg["vm"]["emulated"] and tcg["vmcn"]["accelerator"] == "tcg"
    none = status(facts={**KVM_HOST, "vm_accelerator": None})
    assert none["vm"]["skip"] and none["vmcn"]["skip"] and not none["vm"]["ready"]
    assert none["vm"]["reason"].startswith("neither KVM nor QEMU on this host")


def test_summary_lines():
    result = status(venv=False)
    assert summary(result, ["bm", "cn"]) == [
        "bm: skipped: no workload environment at /opt/platbench/venv: run site.yml (role platbench.lab.workload_env)",
        "cn: ready",
    ]


def run_module(capsys, args):
    with patch_module_args(args), pytest.raises(SystemExit):
        module.main()
    return json.loads(capsys.readouterr().out)


def engines_on_the_command_line(monkeypatch, installed):
    """The module asks each engine on its command line: here only ``installed`` ones answer, holding IMAGE."""
    asked = []

    def run(_module, argv):
        asked.append(argv)
        if argv[0] not in installed:
            return None
        return (0, "26.1.5\n") if argv[1] == "version" else (0, IMAGE + "\n")

    monkeypatch.setattr(module, "run", run)
    return asked


def test_the_module_reads_the_venv_and_guest_image_itself(tmp_path, capsys, monkeypatch):
    asked = engines_on_the_command_line(monkeypatch, {"docker"})
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "venv" / "bin" / "python").write_text("")
    guest = tmp_path / "current.json"
    guest.write_text(json.dumps(GUEST))
    result = run_module(
        capsys,
        {
            "facts": KVM_HOST,
            "prefix": str(tmp_path),
            "guest_image": str(guest),
            "platforms": ["bm", "vmcn", "sg"],
        },
    )
    assert result["ready"] == ["bm", "cn", "vm", "vmcn"] and result["emulated"] == []
    assert ["docker", "image", "inspect", "--format", "{{.Id}}", "platbench/workload:latest"] in asked
    assert not result["platforms"]["pd"]["ready"] and "no Podman engine answers" in result["platforms"]["pd"]["reason"]
    assert result["guest_image"] == GUEST and result["image_id"] == IMAGE and not result["changed"]
    assert result["summary"][0] == "bm: ready" and result["summary"][2].startswith("sg: skipped: ")


def test_the_module_without_venv_or_guest_image(tmp_path, capsys, monkeypatch):
    engines_on_the_command_line(monkeypatch, set())
    result = run_module(
        capsys,
        {
            "facts": {**KVM_HOST, "vm_accelerator": "tcg"},
            "prefix": str(tmp_path),
            "guest_image": str(tmp_path / "none.json"),
        },
    )
    assert result["ready"] == [] and result["emulated"] == ["vm", "vmcn", "vmsg"]
    assert len(result["summary"]) == len(platforms.LABELS)


def test_the_module_rejects_an_unknown_platform_naming_the_setting(tmp_path, capsys):
    result = run_module(
        capsys,
        {
            "facts": KVM_HOST,
            "platforms": ["bm", "docker"],
            "platforms_source": "platbench_platforms (the inventory's group_vars/all.yml)",
        },
    )
    assert result["failed"]
    assert result["msg"].startswith(
        "platbench_platforms (the inventory's group_vars/all.yml): unknown platform(s) "
        "'docker'; known: bm, cr, ns, sc, cn, pd, gv, lx, vm, vmcn, vmsg, mvm, sg, k8s"
    )


def test_an_unreadable_guest_image_is_a_warning_and_no_guest(tmp_path, capsys):
    broken = tmp_path / "current.json"
    broken.write_text("{not json")
    result = run_module(capsys, {"facts": KVM_HOST, "guest_image": str(broken)})
    assert not result["platforms"]["vm"]["ready"] and "cannot be read" in result["warnings"][0]


def test_each_requirement_of_the_registry_has_one_check_in_the_table_and_an_unknown_one_is_refused():
    assert set(CHECKS) == set(platforms.REQUIREMENTS)
    assert {requirement for platform in platforms.PLATFORMS for requirement in platform.requires} <= set(CHECKS)
    with pytest.raises(ValueError, match="unknown requirement 'quantum'; known: venv, engine"):
        requirement_problem("quantum", {})
