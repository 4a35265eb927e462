# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""What platbench.lab.nvidia_driver installs on a host, decided from its facts and the role's settings.

One plan per host: where the driver comes from (NVIDIA's CUDA repository, Debian's non-free archive or
Ubuntu's archive), the packages at the pinned branch, the apt pin or the dnf module stream that keeps
the branch, and the command that rebuilds the initramfs once nouveau is blacklisted. Every setting that
cannot work on the host is a problem naming the variable and what to set instead.
"""

from __future__ import annotations

import re

BRANCH = re.compile(r"^[0-9]{3,4}$")
REPOS = ("nvidia", "debian")
# The driver's source packages in Debian's archive and NVIDIA's CUDA repository for Debian (same names).
DEBIAN_DRIVER_SOURCES = ("nvidia-graphics-drivers", "nvidia-open-gpu-kernel-modules")
# The one driver branch each Debian release packages in its own non-free archive.
DEBIAN_ARCHIVE_BRANCHES = {"12": "535", "13": "550"}
UBUNTU_RELEASES = ("22.04", "24.04")
EL_RELEASES = ("8", "9")
# NVIDIA's CUDA repositories name x86_64 so, and ARM servers sbsa.
CUDA_ARCH = {"x86_64": "x86_64", "aarch64": "sbsa"}
INITRAMFS = {"Debian": ["update-initramfs", "-u"], "RedHat": ["dracut", "--force"]}
# The key that signs NVIDIA's CUDA rpm repositories, in each of them.
CUDA_RPM_KEY = "D42D0685.pub"


def apt_branch_pin(sources, branch):
    """apt preferences that keep every binary package of ``sources`` at ``branch``.* and refuse other versions."""
    records = []
    for source in sources:
        records.append(f"Package: src:{source}\nPin: version {branch}.*\nPin-Priority: 990\n")
        records.append(f"Package: src:{source}\nPin: version *\nPin-Priority: -1\n")
    # The first record that matches a version decides its priority.
    return "\n".join(records)


def persistence_off(query_csv):
    """PCI bus ids of the GPUs whose persistence mode is off, from
    ``nvidia-smi --query-gpu=pci.bus_id,persistence_mode --format=csv,noheader``."""
    off = []
    for line in str(query_csv).splitlines():
        bus_id, _, mode = (part.strip() for part in line.partition(","))
        if bus_id and mode.lower() == "disabled":
            off.append(bus_id)
    return off


def _branch_problems(branch):
    if not BRANCH.match(str(branch)):
        return [
            f"nvidia_driver_branch is {branch!r}; it must be a driver branch number such as '580' "
            "(the first field of a driver version: 580 for 580.95.05)."
        ]
    return []


def _release_supported(name, release, supported, problems):
    if release in supported:
        return True
    problems.append(
        f"{name} {release or '?'} is not supported by platbench.lab.nvidia_driver; "
        f"it supports {name} {', '.join(supported)}."
    )
    return False


def _debian(facts, settings, problems):
    major = str(facts.get("distribution_major_version", ""))
    repo, branch, open_modules = settings["repo"], str(settings["branch"]), settings["open"]
    if not _release_supported("Debian", major, sorted(DEBIAN_ARCHIVE_BRANCHES), problems):
        return {}
    if repo == "debian" and branch != DEBIAN_ARCHIVE_BRANCHES[major]:
        problems.append(
            f"nvidia_driver_repo is debian, but Debian {major}'s archive packages only driver branch "
            f"{DEBIAN_ARCHIVE_BRANCHES[major]}, not nvidia_driver_branch {branch}. Set nvidia_driver_branch: "
            f"'{DEBIAN_ARCHIVE_BRANCHES[major]}', or nvidia_driver_repo: nvidia "
            "(NVIDIA's CUDA repository, newer branches)."
        )
    if repo == "debian" and open_modules:
        problems.append(
            "nvidia_driver_open is true, but the open kernel modules are installed from NVIDIA's CUDA repository only: "
            "set nvidia_driver_repo: nvidia, or nvidia_driver_open: false."
        )
    kernel_module = "nvidia-kernel-open-dkms" if open_modules else "nvidia-kernel-dkms"
    # nvidia-smi and libcuda1 are only recommended by nvidia-driver; recommendations are left out (a desktop).
    packages = ["nvidia-driver", kernel_module, "nvidia-smi", "libcuda1", "nvidia-persistenced"]
    packages += ["firmware-misc-nonfree", "linux-headers-" + facts.get("kernel", "")]
    cuda_repo, pinned = None, DEBIAN_DRIVER_SOURCES
    if repo == "nvidia":
        # NVIDIA's repository versions the persistence daemon with the driver, newest branch first; Debian's
        # archive has one version of it, whatever the branch.
        pinned += ("nvidia-persistenced",)
        cuda_repo = "%s/debian%s/%s/" % (settings["cuda_repo_base_url"].rstrip("/"), major, _cuda_arch(facts, problems))
    return {
        "family": "debian",
        "packages": packages,
        "cuda_repo_url": cuda_repo,
        "debian_components": ["contrib", "non-free", "non-free-firmware"],
        "apt_pin": apt_branch_pin(pinned, branch),
    }


def _ubuntu(facts, settings, problems):
    version = str(facts.get("distribution_version", ""))
    _release_supported("Ubuntu", version, UBUNTU_RELEASES, problems)
    # The branch is in the package names, so nothing else is pinned.
    flavour = "%s-server" % settings["branch"]
    driver = "nvidia-driver-%s%s" % (flavour, "-open" if settings["open"] else "")
    return {
        "family": "ubuntu",
        "packages": [driver, "nvidia-utils-" + flavour, "linux-headers-" + facts.get("kernel", "")],
        "cuda_repo_url": None,
        "apt_pin": None,
    }


def _el(facts, settings, problems):
    major = str(facts.get("distribution_major_version", ""))
    # Where NVIDIA's CUDA repository has one dnf module stream per driver branch.
    _release_supported("EL", major, EL_RELEASES, problems)
    stream = "%s-%s" % (settings["branch"], "open" if settings["open"] else "dkms")
    base = settings["cuda_repo_base_url"].rstrip("/")
    cuda_repo = "%s/rhel%s/%s/" % (base, major, _cuda_arch(facts, problems))
    # DKMS comes from EPEL: its release package is in the extras of the rebuilds, RHEL installs it from Fedora.
    if facts.get("distribution") == "RedHat":
        epel = f"https://dl.fedoraproject.org/pub/epel/epel-release-latest-{major}.noarch.rpm"
        epel_key = f"https://dl.fedoraproject.org/pub/epel/RPM-GPG-KEY-EPEL-{major}"
    else:
        epel, epel_key = "epel-release", None
    return {
        "family": "el",
        "packages": ["@nvidia-driver:%s" % stream, "kernel-devel-" + facts.get("kernel", ""), "kernel-headers"],
        "module_stream": "nvidia-driver:" + stream,
        "cuda_repo_url": cuda_repo,
        "cuda_repo_gpgkey": cuda_repo + CUDA_RPM_KEY,
        "epel_package": epel,
        "epel_gpgkey": epel_key,
        "apt_pin": None,
    }


def _cuda_arch(facts, problems):
    arch = facts.get("architecture", "")
    if arch not in CUDA_ARCH:
        problems.append(
            f"NVIDIA's CUDA repository has no packages for architecture {arch or '?'}; "
            f"platbench.lab.nvidia_driver supports {', '.join(CUDA_ARCH)}."
        )
    return CUDA_ARCH.get(arch, arch)


def driver_plan(facts, branch, repo="nvidia", open_modules=False, cuda_repo_base_url=""):
    """The plan for a host with Ansible facts ``facts``; ``problems`` lists every setting that cannot work there."""
    settings = {"branch": str(branch), "repo": repo, "open": bool(open_modules)}
    settings["cuda_repo_base_url"] = cuda_repo_base_url
    problems = _branch_problems(branch)
    if repo not in REPOS:
        problems.append(f"nvidia_driver_repo is {repo!r}; choose one of {', '.join(REPOS)}.")
    # Wrong on any host: checked before the host's GPUs decide whether it gets a driver at all.
    setting_problems = list(problems)
    family = facts.get("os_family")
    if facts.get("distribution") == "Ubuntu":
        plan = _ubuntu(facts, settings, problems)
    elif family == "Debian":
        plan = _debian(facts, settings, problems)
    elif family == "RedHat":
        plan = _el(facts, settings, problems)
    else:
        problems.append(
            f"platbench.lab.nvidia_driver installs the driver on Debian, Ubuntu and EL hosts; this host is "
            f"{facts.get('distribution', '?')} ({family or '?'})."
        )
        plan = {"family": None, "packages": [], "cuda_repo_url": None, "apt_pin": None}
    plan["installer"] = "dnf" if family == "RedHat" else "apt"
    plan["initramfs_command"] = INITRAMFS.get(family, [])
    plan["setting_problems"] = setting_problems
    plan["problems"] = problems
    return plan
