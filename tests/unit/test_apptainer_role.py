"""The apptainer role, which no development machine can run for real (no Apptainer, no access to its
releases): argument validation with bad inputs, check mode against this Debian machine with the
.deb served from 127.0.0.1, and the syntax of playbooks/lab_apptainer.yml."""

from __future__ import annotations

import functools
import hashlib
import re
import subprocess
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest
from playbook_run import ENV, REPO, run_playbook

PLAYBOOK = REPO / "tests/roles/apptainer/apply.yml"
DEB = b"not a real package: check mode only asks whether the file is there\n"


@pytest.fixture
def release(tmp_path):
    """A release directory served on 127.0.0.1, holding apptainer_1.4.5_amd64.deb."""
    served = tmp_path / "release"
    served.mkdir()
    (served / "apptainer_1.4.5_amd64.deb").write_bytes(DEB)

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(served)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def role_vars(tmp_path, base_url="http://127.0.0.1:9", **extra):
    return {
        "apptainer_deb_dir": str(tmp_path / "deb"),
        "apptainer_sif_dir": str(tmp_path / "sif"),
        "apptainer_deb_url": f"{base_url}/apptainer_1.4.5_amd64.deb",
        "apptainer_deb_checksum": "sha256:" + hashlib.sha256(DEB).hexdigest(),
        **extra,
    }


def apply_role(tmp_path, variables, *options):
    return run_playbook(PLAYBOOK, tmp_path, variables, *options)


@pytest.mark.parametrize(
    "extra, expected",
    [
        ({"apptainer_source": "snap"}, "value of apptainer_source must be one of: auto, deb, ppa, epel, got: snap"),
        ({"apptainer_build_sif": "perhaps"}, "apptainer_build_sif"),
        (
            {"apptainer_version": "1.0.3"},
            "apptainer_version 1.0.3: Apptainer 1.0.3 is installed, older than 1.1.0 (apptainer_minimum_version)",
        ),
        ({"apptainer_minimum_version": "latest"}, "apptainer_minimum_version must be a version like 1.1.0"),
        ({"apptainer_source": "epel"}, "platbench.lab.apptainer installs from EPEL on EL"),
    ],
)
def test_bad_input_fails_before_anything_is_installed(tmp_path, extra, expected):
    run = apply_role(tmp_path, role_vars(tmp_path, **extra), "--check")
    assert run.recap()[1] == 1
    assert expected in " ".join(run.output.split())
    assert not (tmp_path / "deb").exists()


def check_mode_output(run):
    changed, failed = run.recap()
    assert failed == 0, run.output[-3000:]
    return changed, " ".join(run.output.split())


def test_check_mode_on_a_fresh_debian_host_says_what_it_would_fetch_and_stops_before_the_sif(tmp_path):
    # Nothing answers on the URL: on a fresh host check mode only says what a real run fetches.
    changed, output = check_mode_output(apply_role(tmp_path, role_vars(tmp_path), "--check"))
    assert "install_deb.yml" in output
    assert (
        "A real run downloads http://127.0.0.1:9/apptainer_1.4.5_amd64.deb into "
        f"{tmp_path / 'deb'}, checked against sha256:{hashlib.sha256(DEB).hexdigest()}"
    ) in output
    assert re.search(r"Install Apptainer from the \.deb\] \*+ skipping:", output)
    assert "Apptainer is not installed on localhost yet: a real run installs it (deb)" in output
    assert "sif.yml" not in output
    assert changed == 1  # the .deb's directory
    assert not (tmp_path / "deb").exists() and not (tmp_path / "sif").exists()


def test_check_mode_with_the_directory_there_asks_the_server_for_the_deb(tmp_path, release):
    (tmp_path / "deb").mkdir()
    changed, output = check_mode_output(apply_role(tmp_path, role_vars(tmp_path, base_url=release), "--check"))
    assert re.search(r"Download the Apptainer release \.deb, version 1\.4\.5\] \*+ changed:", output)
    assert re.search(r"Install Apptainer from the \.deb\] \*+ skipping:", output)
    assert "sif.yml" not in output and changed == 1
    assert list((tmp_path / "deb").iterdir()) == []


def test_the_playbook_passes_syntax_check(playbook):
    run = playbook("playbooks/lab_apptainer.yml", None, "--syntax-check", timeout=120)
    assert run.rc == 0, run.output


@pytest.mark.parametrize(
    "version, checksum",
    [
        ("1.4.5", "sha256:70f19af846501acfbc2e42e7cfeee9ee11ddbbfa1c3502d0d99cde34e8e0af05"),
        ("1.4.4", "sha256:https://github.com/apptainer/apptainer/releases/download/v1.4.4/sha256sums"),
    ],
)
def test_the_deb_is_checked_against_the_pinned_sum_or_its_release_sums(version, checksum):
    """The pinned release's .deb is checked against the sum platbench pins; another version against its release's."""
    role = REPO / "roles/apptainer"
    run = subprocess.run(
        ["ansible", "-i", "localhost,", "localhost", "-c", "local", "-m", "ansible.builtin.debug"]
        + ["-a", "msg={{ apptainer_deb_checksum }}", "-e", f"@{role}/defaults/main.yml", "-e", f"@{role}/vars/main.yml"]
        + ["-e", f"apptainer_version={version}"],
        cwd=REPO,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert f'"msg": "{checksum}"' in run.stdout, run.stdout + run.stderr
