"""platbench.lab as another repository consumes it: the built tarball, installed elsewhere.

Nothing here reads the checkout's roles through ansible.cfg: the collection is built with
`ansible-galaxy collection build`, installed offline into a throw-away consumer directory
(its dependencies resolved against the collections of the `ansible` package), and used by FQCN
from there. Docker may or may not be installed on the machine; none of these tests needs it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from packaging.specifiers import SpecifierSet

from tests import skips

REPO = Path(__file__).resolve().parents[2]
GALAXY = yaml.safe_load((REPO / "galaxy.yml").read_text())
COLLECTION = "%s.%s" % (GALAXY["namespace"], GALAXY["name"])
ROLES = sorted(path.name for path in (REPO / "roles").iterdir() if (path / "tasks").is_dir())
BIN = Path(sys.executable).parent

# The sanity tests run on every build. Left out: pylint and pep8 (ruff lints the Python, see
# tests/test_lint.py), pslint (no PowerShell), changelog (CHANGELOG.md is written by hand, not
# by antsibull-changelog), shellcheck (no shell scripts among the plugins, and no shellcheck
# binary on a fresh machine).
SANITY_TESTS = [
    "action-plugin-docs",
    "ansible-doc",
    "compile",
    "empty-init",
    "ignores",
    "import",
    "line-endings",
    "no-assert",
    "no-get-exception",
    "no-illegal-filenames",
    "no-smart-quotes",
    "replace-urlopen",
    "runtime-metadata",
    "shebang",
    "symlinks",
    "use-argspec-type-path",
    "use-compat-six",
    "validate-modules",
    "yamllint",
]

FQCN = r"[a-z_][a-z0-9_]*\.[a-z_][a-z0-9_]*\.[a-z_][a-z0-9_]*"
TASK_LISTS = ("tasks", "pre_tasks", "post_tasks", "handlers", "block", "rescue", "always")
# FQCNs inside Jinja: filters, tests, lookups.
JINJA_FQCN = re.compile(r"(?:\|\s*|\bis\s+(?:not\s+)?|\b(?:lookup|query|q)\(\s*['\"])(%s)" % FQCN)


def consumer_env(consumer: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("ANSIBLE_")}
    env.update(
        ANSIBLE_CONFIG=str(consumer / "ansible.cfg"),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_FORCE_COLOR="0",
        PATH="%s%s%s" % (BIN, os.pathsep, env.get("PATH", "")),
    )
    return env


def run(argv, cwd, env, timeout=300):
    return subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def consumer(tmp_path_factory) -> Path:
    """A directory of another repository with the built collection installed into ./collections."""
    dist = tmp_path_factory.mktemp("dist")
    consumer = tmp_path_factory.mktemp("consumer")
    (consumer / "ansible.cfg").write_text("[defaults]\ncollections_path = ./collections\n")
    env = consumer_env(consumer)
    build = run([BIN / "ansible-galaxy", "collection", "build", "--output-path", dist, REPO], consumer, env)
    assert build.returncode == 0, build.stdout + build.stderr
    tarball = dist / ("%s-%s-%s.tar.gz" % (GALAXY["namespace"], GALAXY["name"], GALAXY["version"]))
    # --offline: the dependencies must be satisfied by the collections the ansible package ships.
    install = run(
        [BIN / "ansible-galaxy", "collection", "install", "--offline", tarball, "-p", "collections"], consumer, env
    )
    assert install.returncode == 0, install.stdout + install.stderr
    installed = consumer / "collections/ansible_collections/platbench/lab"
    assert (installed / "MANIFEST.json").exists() and not installed.is_symlink()
    return consumer


def test_every_role_documents_its_entry_points_from_the_tarball(consumer):
    docs = run(
        [BIN / "ansible-doc", "-t", "role", "--json"] + ["%s.%s" % (COLLECTION, role) for role in ROLES],
        consumer,
        consumer_env(consumer),
    )
    assert docs.returncode == 0, docs.stderr
    found = json.loads(docs.stdout)
    for role in ROLES:
        entry = found["%s.%s" % (COLLECTION, role)]
        assert entry["collection"] == COLLECTION
        assert str(consumer) in entry["path"], entry["path"]
        assert entry["entry_points"]["main"]["short_description"], role


@skips.needs_root("applies the role to this machine in check mode, as root")
def test_docker_role_check_mode_on_a_python_without_requests(consumer, tmp_path):
    """A fresh host's system Python has no `requests`: check mode must still pass."""
    if shutil.which("apt-get"):
        no_apt = subprocess.run(["/usr/bin/python3", "-c", "import apt"], capture_output=True).returncode
        assert no_apt == 0, "the apt module runs check mode only with python3-apt: `make venv` installs it"
    bare = tmp_path / "bare-python"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", bare], check=True, timeout=120)
    python = bare / "bin/python"
    assert subprocess.run([python, "-c", "import requests"], capture_output=True).returncode != 0
    playbook = consumer / "docker.yml"
    playbook.write_text(
        yaml.safe_dump(
            [
                {
                    "name": "Use the docker role as another repo would",
                    "hosts": "all",
                    "roles": ["%s.docker" % COLLECTION],
                }
            ],
            sort_keys=False,
        )
    )
    check = run(
        [
            BIN / "ansible-playbook",
            "-i",
            "localhost,",
            "-c",
            "local",
            "--check",
            "--diff",
            "-e",
            "ansible_python_interpreter=%s" % python,
            playbook,
        ],
        consumer,
        consumer_env(consumer),
    )
    assert check.returncode == 0, check.stdout[-6000:] + check.stderr[-3000:]
    assert "docker : Install the Python packages]" in check.stdout  # requests was missing, and would be installed


def ignore_file_version() -> str:
    from ansible.release import __version__

    return ".".join(__version__.split(".")[:2])


def seed_offline_pip_bootstrap() -> None:
    """ansible-test bootstraps pip in its sanity venvs from a script it downloads from
    ci-files.testing.ansible.com unless ~/.ansible/test/cache/get_pip_<version>.py is there."""
    import types

    from ansible_test._internal.python_requirements import get_venv_packages

    version = get_venv_packages(types.SimpleNamespace(version="%d.%d" % sys.version_info[:2]))["pip"]
    cache = Path.home() / ".ansible/test/cache" / ("get_pip_%s.py" % version.replace(".", "_"))
    if not cache.exists() or cache.read_text() != (REPO / "tests/sanity/get_pip.py").read_text():
        cache.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO / "tests/sanity/get_pip.py", cache)


def test_ansible_test_sanity_on_the_installed_collection(consumer):
    assert (REPO / "tests/sanity" / ("ignore-%s.txt" % ignore_file_version())).exists(), (
        "ansible-core changed: copy tests/sanity/ignore-*.txt to ignore-%s.txt" % ignore_file_version()
    )
    seed_offline_pip_bootstrap()
    root = consumer / "collections/ansible_collections/platbench/lab"
    env = {key: value for key, value in os.environ.items() if not key.startswith("ANSIBLE_")}
    env["PATH"] = "%s%s%s" % (BIN, os.pathsep, env.get("PATH", ""))
    argv = [BIN / "ansible-test", "sanity", "--local", "--color", "no", "--python", "%d.%d" % sys.version_info[:2]]
    for test in SANITY_TESTS:
        argv += ["--test", test]
    sanity = run(argv, root, env, timeout=900)
    errors = [line for line in (sanity.stdout + sanity.stderr).splitlines() if line.startswith(("ERROR", "FATAL"))]
    assert sanity.returncode == 0, "\n".join(errors) or sanity.stdout[-6000:] + sanity.stderr[-4000:]


def task_lists(node):
    """Every list of tasks in a parsed playbook or task file, blocks included."""
    if isinstance(node, list):
        yield node
        for item in node:
            if isinstance(item, dict):
                for key in TASK_LISTS:
                    if isinstance(item.get(key), list):
                        yield from task_lists(item[key])


def strings(node):
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from strings(key)
            yield from strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from strings(item)


def collections_used() -> dict[str, set[str]]:
    """Collection -> the files that call one of its modules, roles or plugins by FQCN."""
    used: dict[str, set[str]] = {}

    def note(fqcn, path):
        used.setdefault(".".join(fqcn.split(".")[:2]), set()).add(str(path.relative_to(REPO)))

    yaml_files = [
        path
        for pattern in (
            "roles/*/tasks/*.yml",
            "roles/*/handlers/*.yml",
            "roles/*/defaults/*.yml",
            "roles/*/vars/*.yml",
            "roles/*/meta/*.yml",
            "playbooks/*.yml",
            "playbooks/tasks/**/*.yml",
            "playbooks/vars/*.yml",
            "site.yml",
        )
        for path in REPO.glob(pattern)
    ]
    for path in yaml_files:
        data = yaml.safe_load(path.read_text())
        plays = data if isinstance(data, list) else []
        for play in plays:
            for role in play.get("roles", []) if isinstance(play, dict) else []:
                name = role if isinstance(role, str) else role.get("role", role.get("name", ""))
                if re.fullmatch(FQCN, name):
                    note(name, path)
        for tasks in task_lists(data):
            for task in tasks:
                if not isinstance(task, dict):
                    continue
                for key in task:
                    if re.fullmatch(FQCN, str(key)):
                        note(key, path)
                        if key.endswith(("include_role", "import_role")) and re.fullmatch(FQCN, task[key]["name"]):
                            note(task[key]["name"], path)
        for text in strings(data):
            for fqcn in JINJA_FQCN.findall(text):
                note(fqcn, path)
    for path in REPO.glob("roles/*/templates/*.j2"):
        for fqcn in JINJA_FQCN.findall(path.read_text()):
            note(fqcn, path)
    for path in REPO.glob("plugins/**/*.py"):
        for namespace, name in re.findall(r"ansible_collections\.([a-z_0-9]+)\.([a-z_0-9]+)", path.read_text()):
            note("%s.%s.x" % (namespace, name), path)
    for own in ("ansible.builtin", COLLECTION):
        used.pop(own, None)
    return used


def test_galaxy_dependencies_are_exactly_the_collections_used():
    used = collections_used()
    declared = set(GALAXY.get("dependencies") or {})
    assert {"community.docker", "community.libvirt"} <= set(used), used  # the scan itself works
    assert set(used) <= declared, {name: sorted(used[name]) for name in set(used) - declared}
    assert declared <= set(used), "galaxy.yml depends on collections nothing uses: %s" % sorted(declared - set(used))


def test_pinned_collections_are_the_dependencies_at_the_versions_ansible_ships():
    import ansible_collections

    pinned = {
        c["name"]: c["version"]
        for c in yaml.safe_load((REPO / "collections/requirements.yml").read_text())["collections"]
    }
    dependencies = GALAXY["dependencies"]
    assert set(pinned) == set(dependencies)
    for name, version in pinned.items():
        assert version in SpecifierSet(dependencies[name]), (name, version, dependencies[name])
        shipped = [Path(root) / name.replace(".", "/") / "MANIFEST.json" for root in ansible_collections.__path__]
        shipped = [path for path in shipped if path.exists()]
        assert shipped, "%s is not in the installed ansible package" % name
        assert json.loads(shipped[0].read_text())["collection_info"]["version"] == version, name
