"""Offline stand-in for the get-pip.py that ansible-test's sanity venvs bootstrap pip with.

ansible-test creates each sanity virtual environment without pip and then runs
``~/.ansible/test/cache/get_pip_<version>.py`` (through its quiet_pip.py wrapper, with pip's
install arguments, e.g. ``--disable-pip-version-check pip==24.2 --no-setuptools --no-wheel``).
When that file is absent it downloads it from ci-files.testing.ansible.com, which this lab
cannot reach; its own error message says the file may be put there by hand. This is that file:
it installs the pip wheel that CPython ships (ensurepip, no network), then lets that pip
install the exact packages asked for from the package index the rest of the requirements
come from. tests/unit/test_collection.py copies it into place before running ansible-test.
"""

from __future__ import annotations

import subprocess
import sys

DROPPED = {"--no-setuptools", "--no-wheel"}


def main() -> int:
    # Runs as __main__ through runpy, in the new venv's interpreter.
    subprocess.run([sys.executable, "-m", "ensurepip", "--default-pip"], check=True, stdout=subprocess.DEVNULL)
    args = [arg for arg in sys.argv[1:] if arg not in DROPPED]
    return subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", *args], check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
