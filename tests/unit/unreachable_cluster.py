"""A kubeconfig whose API server does not answer (a closed port on 127.0.0.1), for the k8s placements' tests of a
cluster that is down: the cell fails with the first call's error and what it created is still deleted."""

from __future__ import annotations

import json
import socket

TOKEN = "not-a-real-token"  # never to appear in a run's output


def closed_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # closed again when the socket is


def unreachable_kubeconfig(directory):
    """(path, port): a kubeconfig in ``directory`` naming https://127.0.0.1:PORT, where nothing listens."""
    port = closed_port()
    kubeconfig = directory / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{port}"}}],
                "users": [{"name": "u", "user": {"token": TOKEN}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return kubeconfig, port


def assert_refused(message, port):
    """The first call's error: the client library's own when the runner lacks it, else the refused connection."""
    refused = f"port={port}" in message and "Connection refused" in message
    assert refused or "required Python library (kubernetes)" in message, message


def place_on_unreachable_cluster(playbook, path, tmp_path, plan_for):
    """Run the placement playbook ``path`` (its rescue writes the failure to ``outcome_file``) with the plan that
    ``plan_for(kubeconfig)`` makes; check that the cell failed at its first call, refused, and that the token never
    showed. Returns (the plan, the run, its outcome)."""
    kubeconfig, port = unreachable_kubeconfig(tmp_path)
    plan = plan_for(str(kubeconfig))
    outcome_file = tmp_path / "outcome.json"
    run = playbook(path, {"platform_run_cell_plan": plan, "outcome_file": str(outcome_file)})
    assert run.rc == 0, run.output[-5000:]
    outcome = json.loads(outcome_file.read_text())
    assert outcome["task"] == "Make sure the namespace of the cells' Jobs exists"
    assert_refused(outcome["msg"], port)
    assert TOKEN not in run.output
    return plan, run, outcome
