# Copyright: platbench developers
# Apache License 2.0 (see galaxy.yml)
"""The command lines of the Apptainer platforms: `apptainer exec` for sg and vmsg, `apptainer build` for the SIF.

Choices, and why:
- The environment reaches the workload as APPTAINERENV_<NAME> variables of the apptainer process:
  with --cleanenv only those pass, and unlike `--env A=1,B=2` they survive values holding commas
  (CUDA_VISIBLE_DEVICES=0,1, the JSON of PLATBENCH_EXPECTED_GPUS).
- `vnl` is Apptainer's own `--cpus` (a cgroups v2 CPU quota, the same as Docker's `--cpus`): as root it
  needs no systemd, where `systemd-run --scope -p CPUQuota=` needs systemd as PID 1.
- `pin` is `taskset --cpu-list` in front: Apptainer's starter and the workload inherit the affinity.
- The SIF is built from the host's Docker engine (`docker-daemon:<ref>`): the image is read where cn
  runs it, by the reference and id the engine reports, with no multi-GB `docker save` archive on disk.
"""

from __future__ import annotations

ENV_PREFIX = "APPTAINERENV_"
# The workload image's WORKDIR (roles/workload_image/templates/Dockerfile.j2), where `python -m workloads...` runs.
IMAGE_WORKDIR = "/opt/platbench"


def process_env(env):
    """The container's environment as the apptainer process's APPTAINERENV_ variables."""
    return {ENV_PREFIX + name: str(value) for name, value in env.items()}


def exec_argv(sif, argv, binds=(), scratch=(), gpu=False, cpu_quota=None, cpuset="", workdir=IMAGE_WORKDIR):
    """`[taskset --cpu-list CPUSET] apptainer exec ... SIF python ARGV`.

    ``binds`` are mounts (``source``, ``target``, ``mode`` ro|rw); ``scratch`` directories are writable and
    thrown away with the container; ``gpu`` adds --nv (the host's NVIDIA driver and devices);
    ``cpu_quota`` (CPUs, vnl) adds --cpus; ``cpuset`` (pin) puts taskset in front."""
    command = ["taskset", "--cpu-list", cpuset] if cpuset else []
    command += ["apptainer", "exec", "--cleanenv", "--containall"]
    for mount in binds:
        command += ["--bind", f"{mount['source']}:{mount['target']}:{mount['mode']}"]
    for directory in scratch:
        command += ["--scratch", str(directory)]
    if gpu:
        command.append("--nv")
    if cpu_quota is not None:
        command += ["--cpus", f"{float(cpu_quota):g}"]
    return command + ["--pwd", workdir, str(sif), "python"] + list(argv)


def build_argv(image_ref, sif_path):
    """Build the SIF of ``image_ref`` from the host's Docker engine into ``<sif_path>.part``; the caller
    renames it once complete, so an interrupted build never leaves a SIF that looks finished."""
    if not image_ref or not str(sif_path).endswith(".sif"):
        raise ValueError(f"need an image reference and a .sif path, got {image_ref!r} and {sif_path!r}")
    return ["apptainer", "build", "--force", f"{sif_path}.part", f"docker-daemon:{image_ref}"]
