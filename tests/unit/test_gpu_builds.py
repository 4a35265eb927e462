"""GPU builds of the frameworks, which no development machine can run (no GPU), checked by what
the roles compute and write for hosts with injected GPU facts: the requirement list each of bm
(workload_env), cn (workload_image) and the guest (guest_image) gets, the image's build context
and tag, the guest's hash inputs, apt sources and driver version, and the docker role's toolkit."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import yaml
from ansible_collections.platbench.lab.plugins.action.host_facts import gpu_facts
from playbook_run import run_playbook

REPO = Path(__file__).resolve().parents[2]
INVENTORY_VARS = REPO / "inventories/local/group_vars/all.yml"
SETTINGS = yaml.safe_load(INVENTORY_VARS.read_text())
CPU_LIST = SETTINGS["platbench_workload_requirements"]
GPU_LIST = SETTINGS["platbench_workload_requirements_gpu"]
HOST_GPU, GUEST_GPU = "0000:3b:00.0", "0000:d8:00.0"
GPU_FACTS = [
    {"pci_address": HOST_GPU, "device_id": "0x20b0", "driver": "nvidia", "iommu_group": "30"},
    {"pci_address": GUEST_GPU, "device_id": "0x20b0", "driver": "vfio-pci", "iommu_group": "31"},
]


def play(tmp_path, tasks, variables=None, facts=None):
    """Runs tasks on localhost; returns the variables the last task wrote to tmp_path/out.json."""
    pre = [{"name": "Inject facts", "inject_facts": {"facts": facts}}] if facts is not None else []
    plays = [
        {
            "name": "GPU builds",
            "hosts": "localhost",
            "connection": "local",
            "gather_facts": False,
            "vars_files": [str(INVENTORY_VARS)],
            "tasks": pre + tasks,
        }
    ]
    return run_playbook(plays, tmp_path, dict(variables or {}, ansible_python_interpreter=sys.executable))


def dump(names, dest):
    """A task writing the named variables to dest as JSON."""
    content = "{{ {%s} | to_json }}" % ", ".join("'%s': %s" % (name, name) for name in names)
    return {"name": "Write what the role computed", "ansible.builtin.copy": {"content": content, "dest": str(dest)}}


def ok(run):
    assert run.rc == 0, run.output[-8000:]
    return run


def test_the_gpu_list_pins_the_same_versions_as_the_cpu_list():
    def versions(specs):
        return {re.split(r"[\[=]", spec)[0].replace("-cpu", "").lower(): spec.split("=")[-1] for spec in specs}

    assert versions(GPU_LIST) == versions(CPU_LIST)
    assert "tensorflow[and-cuda]==2.21.0" in GPU_LIST and "tensorflow-cpu==2.21.0" in CPU_LIST
    # The exact match keeps a mirror's torch 2.13.0+cpu, which ==2.13.0 accepts, out of the GPU list.
    assert "torch===2.13.0" in GPU_LIST


# --- which list each role picks, from the inventory's assignment and the host's GPU facts ---

ROLE_DEFAULTS = {
    role: REPO / "roles" / role / "defaults/main.yml" for role in ("workload_env", "workload_image", "guest_image")
}


def picked_lists(tmp_path, assignment, gpus):
    """The requirement lists of the bm venv, the image and the guest, from the roles' own defaults."""
    tasks = [
        {"name": "Read %s's defaults" % role, "ansible.builtin.include_vars": {"file": str(path)}}
        for role, path in ROLE_DEFAULTS.items()
    ] + [
        dump(
            [
                "workload_env_gpu",
                "workload_env_requirements",
                "workload_image_gpu",
                "workload_image_requirements",
                "guest_image_gpu",
                "guest_image_requirements",
            ],
            tmp_path / "out.json",
        )
    ]
    ok(
        play(
            tmp_path,
            tasks,
            {"platbench_gpu_assignment": assignment},
            facts={"platbench": {"gpus": gpus, **gpu_facts(assignment, gpus, "localhost")}},
        )
    )
    return json.loads((tmp_path / "out.json").read_text())


@pytest.mark.parametrize(
    "assignment, gpus, bm, image, guest",
    [
        # One GPU stays with the host, one goes to guests: every build is the GPU one.
        ({GUEST_GPU: "guests"}, GPU_FACTS, "gpu", "gpu", "gpu"),
        # Nothing assigned: both GPUs stay with the host; guests get none.
        ({}, GPU_FACTS, "gpu", "gpu", "cpu"),
        # All GPUs to guests: bm has none, the image still serves the guests' containers (vmcn).
        ({HOST_GPU: "guests", GUEST_GPU: "guests"}, GPU_FACTS, "cpu", "gpu", "gpu"),
        # No GPU at all: the CPU builds, as before.
        ({}, [], "cpu", "cpu", "cpu"),
    ],
)
def test_each_platform_gets_the_builds_its_gpus_call_for(tmp_path, assignment, gpus, bm, image, guest):
    lists = {"gpu": GPU_LIST, "cpu": CPU_LIST}
    found = picked_lists(tmp_path, assignment, gpus)
    assert (found["workload_env_gpu"], found["workload_env_requirements"]) == (bm == "gpu", lists[bm])
    assert (found["workload_image_gpu"], found["workload_image_requirements"]) == (image == "gpu", lists[image])
    assert (found["guest_image_gpu"], found["guest_image_requirements"]) == (guest == "gpu", lists[guest])


# --- the workload image: build context, tag and recorded build for a GPU and a CPU host ---


def image_context(tmp_path, gpu):
    """Assembles the image's build context (no engine needed) from wheelhouses seeded in tmp_path."""
    wheelhouses = tmp_path / "wheelhouses"
    workloads = tmp_path / "workloads"
    workloads.mkdir(exist_ok=True)
    (workloads / "__init__.py").write_text("")
    seed = []
    # Stand-in wheels: the role must copy the wheelhouse of the list it picked, and no other.
    for name, specs in (("cpu", CPU_LIST), ("gpu", GPU_LIST)):
        seed += [
            {
                "name": "Name the %s wheelhouse" % name,
                "ansible.builtin.include_role": {"name": "platbench.lab.wheelhouse", "tasks_from": "path"},
                "vars": {"wheelhouse_requirements": specs, "wheelhouse_dir": str(wheelhouses)},
            },
            {"name": "Create it", "ansible.builtin.file": {"path": "{{ wheelhouse_path }}", "state": "directory"}},
            {
                "name": "Seed it",
                "ansible.builtin.copy": {
                    "content": "\n".join(specs) + "\n",
                    "dest": "{{ wheelhouse_path }}/requirements.txt",
                },
            },
            {
                "name": "Seed a wheel",
                "ansible.builtin.copy": {"content": name, "dest": "{{ wheelhouse_path }}/frameworks-%s.whl" % name},
            },
        ]
    context = tmp_path / ("context-%s" % ("gpu" if gpu else "cpu"))
    tasks = seed + [
        {
            "name": "Assemble the image's build context",
            "ansible.builtin.include_role": {"name": "platbench.lab.workload_image", "tasks_from": "context"},
        },
        dump(["workload_image_inputs_hash.stdout", "workload_image_frameworks"], tmp_path / "out.json"),
    ]
    variables = {
        "workload_image_gpu": gpu,
        "workload_image_build_dir": str(context),
        "workload_image_workloads_source": str(workloads),
        "wheelhouse_dir": str(wheelhouses),
    }
    # The wheelhouse is named for the host's architecture, as setup reports it.
    facts = {"architecture": "x86_64", "platbench": {"gpus": [], **gpu_facts({}, [], "localhost")}}
    ok(play(tmp_path, tasks, variables, facts=facts))
    found = json.loads((tmp_path / "out.json").read_text())
    files = sorted(str(p.relative_to(context)) for p in context.rglob("*") if p.is_file())
    return found, context, files


def test_gpu_and_cpu_hosts_build_different_images_from_the_same_dockerfile(tmp_path):
    gpu, gpu_context, gpu_files = image_context(tmp_path, gpu=True)
    cpu, cpu_context, cpu_files = image_context(tmp_path, gpu=False)
    assert gpu["workload_image_frameworks"] == "gpu" and cpu["workload_image_frameworks"] == "cpu"
    assert (gpu_context / "wheelhouse/requirements.txt").read_text().split() == GPU_LIST
    assert (cpu_context / "wheelhouse/requirements.txt").read_text().split() == CPU_LIST
    assert "wheelhouse/frameworks-gpu.whl" in gpu_files and "wheelhouse/frameworks-cpu.whl" not in gpu_files
    assert "wheelhouse/frameworks-cpu.whl" in cpu_files and "wheelhouse/frameworks-gpu.whl" not in cpu_files
    # The build's label is passed at build time: the same Dockerfile, with nothing GPU in it, but for
    # its base, whose tag names its packages (a GPU base also has gcc and Python's headers, for Triton).
    dockerfile = (cpu_context / "Dockerfile").read_text()
    base_tag = re.compile(r"debian-base:bookworm-[0-9a-f]{8}")
    assert len(set(base_tag.findall(dockerfile))) == 1
    assert base_tag.findall(dockerfile) != base_tag.findall((gpu_context / "Dockerfile").read_text())
    assert base_tag.sub("BASE", dockerfile) == base_tag.sub("BASE", (gpu_context / "Dockerfile").read_text())
    assert not re.search("gpu|cuda|nvidia", dockerfile, re.I)
    gpu_tag, cpu_tag = gpu["workload_image_inputs_hash.stdout"], cpu["workload_image_inputs_hash.stdout"]
    assert re.fullmatch(r"[0-9a-f]{12}", gpu_tag) and re.fullmatch(r"[0-9a-f]{12}", cpu_tag)
    assert gpu_tag != cpu_tag
    # Same inputs, same tag: a second CPU assembly changes nothing.
    again, _, _ = image_context(tmp_path, gpu=False)
    assert again["workload_image_inputs_hash.stdout"] == cpu_tag
    build = yaml.safe_load((REPO / "roles/workload_image/tasks/build.yml").read_text())
    (start,) = [task for task in build if "community.docker.docker_image" in task]
    labels = start["community.docker.docker_image"]["build"]["labels"]
    assert labels == {"org.platbench.frameworks": "{{ workload_image_frameworks }}"}


# --- the guest image: its name (hash inputs), apt sources, driver version and description ---

GUEST_VARS = {"guest_image_keypair": {"public_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAtest"}}


def guest_ids(tmp_path, **extra):
    tasks = [
        {
            "name": "Name the guest's root file system",
            "ansible.builtin.include_role": {"name": "platbench.lab.guest_image", "tasks_from": "rootfs_id"},
        },
        dump(["guest_image_rootfs_id"], tmp_path / "out.json"),
    ]
    ok(
        play(
            tmp_path,
            tasks,
            dict(GUEST_VARS, **extra),
            facts={"platbench": {"gpus": [], **gpu_facts({}, [], "localhost")}},
        )
    )
    return json.loads((tmp_path / "out.json").read_text())["guest_image_rootfs_id"]


def test_a_gpu_guest_is_another_image_and_a_cpu_guest_keeps_its_name(tmp_path):
    cpu = guest_ids(tmp_path, guest_image_gpu=False)
    # The GPU settings are no input of a CPU guest: changing them does not rename it.
    assert guest_ids(tmp_path, guest_image_gpu=False, guest_image_nvidia_driver_branch="550") == cpu
    # Nor is the driver repository: a CPU guest has no driver.
    assert guest_ids(tmp_path, guest_image_gpu=False, guest_image_nvidia_driver_repo="debian") == cpu
    gpu = guest_ids(tmp_path, guest_image_gpu=True)
    assert gpu != cpu
    assert guest_ids(tmp_path, guest_image_gpu=True, guest_image_nvidia_driver_branch="590") not in (gpu, cpu)
    # The same CPU guest named from the old inputs alone (before GPU guests): only these keys.
    rootfs_id = yaml.safe_load((REPO / "roles/guest_image/tasks/rootfs_id.yml").read_text())[0]
    assert list(rootfs_id["vars"]["inputs"]) == [
        "format",
        "suite",
        "packages",
        "requirements",
        "size_gb",
        "public_key",
        "ca",
    ]
    assert rootfs_id["vars"]["inputs"]["format"] == 2


def test_each_driver_repository_is_another_gpu_guest(tmp_path):
    nvidia = guest_ids(tmp_path, guest_image_gpu=True)
    assert guest_ids(tmp_path, guest_image_gpu=True, guest_image_nvidia_driver_repo="nvidia") == nvidia
    debian = guest_ids(tmp_path, guest_image_gpu=True, guest_image_nvidia_driver_repo="debian")
    assert debian != nvidia
    # The CUDA repository's location and keyring name the nvidia guest, and only that one.
    mirror = "https://mirror.example/cuda/debian12/x86_64/"
    assert guest_ids(tmp_path, guest_image_gpu=True, guest_image_nvidia_cuda_repo_url=mirror) != nvidia
    keyring = "cuda-keyring_1.2-1_all.deb"
    assert guest_ids(tmp_path, guest_image_gpu=True, guest_image_nvidia_cuda_keyring=keyring) != nvidia
    assert (
        guest_ids(
            tmp_path,
            guest_image_gpu=True,
            guest_image_nvidia_driver_repo="debian",
            guest_image_nvidia_cuda_repo_url=mirror,
        )
        == debian
    )


def guest_apt_files(tmp_path, **extra):
    """The apt files the GPU guest's sources task writes into a scratch root, by path under it."""
    root = tmp_path / "root"
    key = tmp_path / "nvidia.asc"
    key.write_text("-----BEGIN PGP PUBLIC KEY BLOCK-----\ntest\n-----END PGP PUBLIC KEY BLOCK-----\n")
    # A stand-in for NVIDIA's CUDA repository: only its keyring package is fetched here.
    cuda_repo = tmp_path / "cuda-repo"
    cuda_repo.mkdir(exist_ok=True)
    (cuda_repo / "cuda-keyring_1.1-1_all.deb").write_bytes(b"!<arch>\nstand-in keyring package\n")
    tasks = [
        {
            "name": "Write the GPU guest's apt sources",
            "ansible.builtin.include_role": {
                "name": "platbench.lab.guest_image",
                "tasks_from": "rootfs_nvidia_sources",
            },
        }
    ]
    variables = dict(
        GUEST_VARS,
        root=str(root),
        guest_image_mirror="http://mirror.example/debian",
        guest_image_nvidia_container_gpgkey_url="file://%s" % key,
        guest_image_nvidia_container_repo_url="https://mirror.example/libnvidia-container/stable",
        # No trailing slash: the role adds the one the keyring's URL needs.
        guest_image_nvidia_cuda_repo_url="file://%s" % cuda_repo,
        **extra,
    )
    ok(play(tmp_path, tasks, variables))
    assert (root / "etc/apt/keyrings/nvidia-container-toolkit.asc").read_text() == key.read_text()
    files = {
        str(path.relative_to(root)): path.read_bytes() for path in root.rglob("*") if path.is_file() and path != key
    }
    return files, cuda_repo


DEBIAN_COMPONENTS = (
    "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm\n"
    "Components: contrib non-free non-free-firmware\n"
    "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
)
TOOLKIT_SOURCE = (
    "Types: deb\nURIs: https://mirror.example/libnvidia-container/stable/deb/$(ARCH)\nSuites: /\n"
    "Signed-By: /etc/apt/keyrings/nvidia-container-toolkit.asc\n"
)


def branch_pin(branch):
    return (
        "Package: src:nvidia-graphics-drivers\nPin: version %s.*\nPin-Priority: 990\n\n"
        "Package: src:nvidia-graphics-drivers\nPin: version *\nPin-Priority: -1\n" % branch
    )


def test_by_default_a_gpu_guest_takes_branch_580_from_nvidias_cuda_repository(tmp_path):
    files, cuda_repo = guest_apt_files(tmp_path)
    text = {path: content.decode() for path, content in files.items() if not path.endswith((".deb", ".asc"))}
    assert text == {
        "etc/apt/sources.list.d/platbench-nvidia-driver.sources": DEBIAN_COMPONENTS,
        "etc/apt/sources.list.d/platbench-nvidia-cuda.sources": (
            "Types: deb\nURIs: file://%s/\nSuites: /\nSigned-By: /usr/share/keyrings/cuda-archive-keyring.gpg\n"
            % cuda_repo
        ),
        "etc/apt/sources.list.d/nvidia-container-toolkit.sources": TOOLKIT_SOURCE,
        "etc/apt/preferences.d/platbench-nvidia-driver": branch_pin("580"),
    }
    # The keyring package waits in the root's apt cache for dpkg (rootfs_nvidia.yml).
    deb = "var/cache/apt/archives/cuda-keyring_1.1-1_all.deb"
    assert files[deb] == (cuda_repo / "cuda-keyring_1.1-1_all.deb").read_bytes()
    install = next(
        task
        for task in yaml.safe_load((REPO / "roles/guest_image/tasks/rootfs_nvidia.yml").read_text())
        if "keyring" in task["name"]
    )
    argv = install["ansible.builtin.command"]["argv"]
    assert "'dpkg', '--path-exclude=/etc/apt/sources.list.d/*', '--install', keyring_deb" in argv
    assert install["vars"]["keyring_deb"] == "/var/cache/apt/archives/{{ guest_image_nvidia_cuda_keyring }}"
    assert install["when"] == "guest_image_nvidia_driver_repo == 'nvidia'"


def test_debian_repository_pins_bookworms_535_without_nvidias_cuda_repository(tmp_path):
    files, _ = guest_apt_files(tmp_path, guest_image_nvidia_driver_repo="debian")
    assert {path: content.decode() for path, content in files.items()} == {
        "etc/apt/keyrings/nvidia-container-toolkit.asc": files[
            "etc/apt/keyrings/nvidia-container-toolkit.asc"
        ].decode(),
        "etc/apt/sources.list.d/platbench-nvidia-driver.sources": DEBIAN_COMPONENTS,
        "etc/apt/sources.list.d/nvidia-container-toolkit.sources": TOOLKIT_SOURCE,
        "etc/apt/preferences.d/platbench-nvidia-driver": branch_pin("535"),
    }


def driver_settings_check(tmp_path, **settings):
    tasks = [
        {
            "name": "Check the GPU guest's driver settings",
            "ansible.builtin.include_role": {"name": "platbench.lab.guest_image", "tasks_from": "precheck_nvidia"},
        }
    ]
    return play(tmp_path, tasks, dict(GUEST_VARS, **settings))


@pytest.mark.parametrize(
    "settings",
    [
        {},
        {"guest_image_nvidia_driver_repo": "nvidia", "guest_image_nvidia_driver_branch": "590"},
        {"guest_image_nvidia_driver_repo": "debian"},
        {"guest_image_nvidia_driver_repo": "debian", "guest_image_nvidia_driver_branch": "535"},
    ],
)
def test_driver_settings_a_repository_has_pass_the_check(tmp_path, settings):
    ok(driver_settings_check(tmp_path, **settings))


def test_debian_with_a_branch_debian_lacks_is_refused_with_what_to_set(tmp_path):
    run = driver_settings_check(
        tmp_path, guest_image_nvidia_driver_repo="debian", guest_image_nvidia_driver_branch="580"
    )
    assert run.rc != 0
    message = " ".join(run.output.split())
    assert (
        "guest_image_nvidia_driver_repo is debian, but Debian bookworm packages no NVIDIA driver branch 580" in message
    )
    assert "(it has 535)" in message and "Set guest_image_nvidia_driver_repo: nvidia" in message


def test_a_driver_repository_the_role_does_not_know_is_refused_before_any_task(tmp_path):
    # The argument specs stop the role before its first task (which would read the host).
    tasks = [{"name": "Build a guest", "ansible.builtin.include_role": {"name": "platbench.lab.guest_image"}}]
    run = play(tmp_path, tasks, dict(GUEST_VARS, guest_image_nvidia_driver_repo="ubuntu"))
    assert run.rc != 0
    assert "guest_image_nvidia_driver_repo must be one of: nvidia, debian, got: ubuntu" in run.output
    assert "Check the inputs and the host" not in run.output


def driver_version(tmp_path, dpkg_lines):
    tasks = [
        {
            "name": "Read the driver version",
            "ansible.builtin.include_role": {
                "name": "platbench.lab.guest_image",
                "tasks_from": "rootfs_nvidia_version",
            },
        },
        dump(["guest_image_nvidia_driver"], tmp_path / "out.json"),
    ]
    run = play(tmp_path, tasks, {"guest_image_dpkg_sources": {"stdout_lines": dpkg_lines}})
    return run, (json.loads((tmp_path / "out.json").read_text()) if run.rc == 0 else None)


def test_the_driver_version_comes_from_the_guest_package_database(tmp_path):
    run, found = driver_version(
        tmp_path,
        [
            "installed dkms 3.0.10-8+deb12u1",
            "installed nvidia-graphics-drivers 535.261.03-1",
            "installed nvidia-graphics-drivers 535.261.03-1",
            "config-files nvidia-graphics-drivers 470.256.02-1",
            "installed nvidia-graphics-drivers-tesla-535 535.247.01-1",
            "installed nvidia-container-toolkit 1.17.8-1",
        ],
    )
    assert found == {"guest_image_nvidia_driver": "535.261.03"}, run.output[-3000:]


def test_a_gpu_guest_without_its_driver_fails_with_what_to_check(tmp_path):
    run, _ = driver_version(tmp_path, ["installed dkms 3.0.10-8+deb12u1"])
    assert run.rc != 0
    message = " ".join(run.output.split())
    assert "source package nvidia-graphics-drivers (branch 580, repository nvidia)" in message
    assert "lists none" in message and "guest_image_nvidia_packages" in message


@pytest.mark.parametrize(
    "record, gpu_driver",
    [
        # A CPU guest recorded before GPU guests existed: no driver.
        ({"rootfs_id": "x", "suite": "bookworm"}, None),
        ({"rootfs_id": "x", "suite": "bookworm", "nvidia_driver": "535.261.03"}, "535.261.03"),
    ],
)
def test_the_guest_description_always_says_which_driver_it_has(tmp_path, record, gpu_driver):
    guest_dir = tmp_path / "guest"
    guest_dir.mkdir()
    tasks = [
        {
            "name": "Name the root file system",
            "ansible.builtin.include_role": {"name": "platbench.lab.guest_image", "tasks_from": "rootfs_id"},
        },
        {
            "name": "Record a built root file system",
            "ansible.builtin.copy": {
                "content": json.dumps(record),
                "dest": "%s/rootfs-{{ guest_image_rootfs_id }}.json" % guest_dir,
            },
        },
        {
            "name": "Describe the image",
            "ansible.builtin.include_role": {"name": "platbench.lab.guest_image", "tasks_from": "rootfs"},
        },
        dump(["guest_image_description"], tmp_path / "out.json"),
    ]
    ok(play(tmp_path, tasks, dict(GUEST_VARS, guest_image_dir=str(guest_dir), guest_image_gpu=False)))
    description = json.loads((tmp_path / "out.json").read_text())["guest_image_description"]
    assert description == dict(record, nvidia_driver=gpu_driver, apptainer_version=None)


def test_a_gpu_guest_docker_registers_the_nvidia_runtime(tmp_path):
    build = yaml.safe_load((REPO / "roles/guest_image/tasks/rootfs_build.yml").read_text())[0]
    tasks = [
        {
            "name": "Render the guest's daemon.json",
            "vars": {"guest_docker_options": build["vars"]["guest_docker_options"]},
            "ansible.builtin.copy": {
                "content": "{{ {'options': guest_docker_options} | to_json }}",
                "dest": str(tmp_path / "out.json"),
            },
        }
    ]
    for gpu in (False, True):
        ok(play(tmp_path, tasks, {"guest_image_gpu": gpu}))
        options = json.loads((tmp_path / "out.json").read_text())["options"]
        base = {"log-driver": "json-file", "iptables": False, "bridge": "none"}
        if gpu:
            base["runtimes"] = {"nvidia": {"path": "nvidia-container-runtime", "args": []}}
        assert options == base
