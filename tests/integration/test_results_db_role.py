"""platbench.lab.results_db for real on this machine: Debian's PostgreSQL (installed, or installed by the role),
its cluster started with pg_ctlcluster where systemd is not PID 1, a login user, its database and its schema.

The role is applied twice (the second run changes nothing), then the test logs in as the user over TCP with psycopg,
as ``platbench index --store postgresql://...`` does, and finds its search_path on the schema and a table it makes
there. The test's own names (not the role's defaults, which a real store on this machine may use) are removed
afterwards (tests/roles/results_db/cleanup.yml), and a cluster that was down before the test is stopped again; the
server keeps the listen_addresses and port the role set (127.0.0.1:5432, postgresql.auto.conf).

Then the results store in that database, as a team uses it: two campaigns written at once from two processes, and
one campaign from two controllers at once (each its own host's cells); history read back; and the server stopped
while a campaign is being written, which loses nothing: the writer says so, the store holds nothing of the campaign,
and indexing it again adds every sample."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest
from playbook_run import REPO, run_playbook

from tests import skips

pytestmark = [pytest.mark.lab, skips.needs_root("the role installs packages and becomes postgres")]

PLAYBOOK = REPO / "tests/roles/results_db/apply.yml"
CLEANUP = REPO / "tests/roles/results_db/cleanup.yml"
PASSWORD = "test-only-5e3f1c"
VARIABLES = {
    "results_db_password": PASSWORD,
    "results_db_user": "platbench_test",
    "results_db_name": "platbench_test",
    "results_db_schema": "results_test",
}
URL = "postgresql://platbench_test@127.0.0.1:5432/platbench_test"


def clusters():
    """pg_lsclusters' rows: [version, cluster, port, status, owner, data directory, log]."""
    listed = subprocess.run(["pg_lsclusters", "--no-header"], capture_output=True, text=True, check=True)
    return [line.split() for line in listed.stdout.splitlines() if line.strip()]


def hba_rules():
    """The networks of the test user's rules in the cluster's pg_hba.conf, in the file's order."""
    version = max((row[0] for row in clusters() if row[1] == "main"), key=int)
    lines = Path(f"/etc/postgresql/{version}/main/pg_hba.conf").read_text().splitlines()
    return [line.split()[3] for line in lines if line.split()[:3] == ["host", "platbench_test", "platbench_test"]]


@pytest.fixture(scope="module")
def results_db(tmp_path_factory):
    """The role applied twice to the cluster it uses (the newest version's main), under the test's names: ``(first
    run, second run)``. At the end the cluster is cleared of the test's database, user and pg_hba.conf rules, and
    stopped again when it was down before."""
    assert shutil.which("apt-get"), "the role installs Debian's PostgreSQL: run this test on Debian/Ubuntu"
    before = {(row[0], row[1]): row[3] for row in clusters()} if shutil.which("pg_lsclusters") else {}
    work = tmp_path_factory.mktemp("results_db")
    first = run_playbook(PLAYBOOK, work / "first", VARIABLES)
    second = run_playbook(PLAYBOOK, work / "second", VARIABLES) if first.rc == 0 else None
    yield first, second
    version = max((row[0] for row in clusters() if row[1] == "main"), key=int)
    if "online" not in {(row[0], row[1]): row[3] for row in clusters()}.get((version, "main"), "down"):
        subprocess.run(["pg_ctlcluster", version, "main", "start"], check=True)  # a test stopped it: clear it
    cleanup = run_playbook(
        CLEANUP,
        work / "cleanup",
        {
            **VARIABLES,
            "results_db_version": version,
            "results_db_hba_file": f"/etc/postgresql/{version}/main/pg_hba.conf",
            "results_db_client_networks": ["127.0.0.1/32"],
        },
    )
    if "online" not in before.get((version, "main"), "down"):
        subprocess.run(["pg_ctlcluster", version, "main", "stop"], check=True)
    assert cleanup.rc == 0, cleanup.output[-3000:]


def test_the_role_makes_a_database_whose_schema_is_the_users_search_path(tmp_path, results_db):
    first, second = results_db
    assert first.rc == 0, "%s\n%s" % (first.failed_messages(), first.output[-4000:])
    changed, _ = first.recap()
    assert changed > 0, first.output[-3000:]
    assert second.recap() == (0, 0), second.output[-4000:]
    # The password is in no task's output, nor in Ansible's events.
    for run in (first, second):
        assert PASSWORD not in run.output
        assert not [event for event in run.events if PASSWORD in str(event)]

    with psycopg.connect(URL, password=PASSWORD, connect_timeout=10) as connection:
        assert connection.execute("SHOW search_path").fetchone() == ("results_test",)
        connection.execute("CREATE TABLE IF NOT EXISTS probe (x int)")
        found = connection.execute(
            "SELECT table_schema FROM information_schema.tables WHERE table_name = 'probe'"
        ).fetchall()
        assert found == [("results_test",)]
        connection.rollback()  # nothing of the probe stays
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(URL, password="wrong", connect_timeout=10).close()

    # Another port and one more network: the server restarts on the port; back to the defaults, the rule goes.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    moved = {**VARIABLES, "results_db_port": port, "results_db_client_networks": ["127.0.0.1/32", "10.99.0.0/16"]}
    assert run_playbook(PLAYBOOK, tmp_path / "moved", moved).recap() == (4, 0)
    assert hba_rules() == ["127.0.0.1/32", "10.99.0.0/16"]
    with psycopg.connect(URL.replace(":5432/", f":{port}/"), password=PASSWORD, connect_timeout=10) as connection:
        assert connection.execute("SHOW port").fetchone() == (str(port),)
    back = run_playbook(PLAYBOOK, tmp_path / "back", VARIABLES)
    assert back.recap() == (4, 0), back.output[-4000:]
    assert hba_rules() == ["127.0.0.1/32"]
    with psycopg.connect(URL, password=PASSWORD, connect_timeout=10) as connection:
        assert connection.execute("SHOW port").fetchone() == ("5432",)


@pytest.mark.parametrize(
    "change, expected",
    [
        ({"results_db_password": None}, "missing required arguments: results_db_password"),
        ({"results_db_port": "many"}, "results_db_port"),
        ({"results_db_schema": "Results-Test"}, "results_db_schema (Results-Test) must be plain lower-case SQL names"),
    ],
)
def test_bad_inputs_are_refused_naming_the_variable(tmp_path, change, expected):
    variables = {name: value for name, value in {**VARIABLES, **change}.items() if value is not None}
    run = run_playbook(PLAYBOOK, tmp_path, variables)
    assert run.rc != 0 and expected in " ".join(run.output.split()), run.output[-3000:]


def synthetic_campaign(directory, name, copies, host="localhost"):
    """A campaign directory whose samples.jsonl holds a fixed campaign's cells ``copies`` times over (each copy
    cells of their own), renamed ``name`` and measured on ``host``: its line count."""
    fixture = REPO / "tests/unit/data/handmade_html_samples.jsonl"
    samples = [json.loads(line) for line in fixture.read_text().splitlines()]
    directory.mkdir(parents=True)
    with (directory / "samples.jsonl").open("w") as handle:
        for copy in range(copies):
            for sample in samples:
                labels = {
                    **sample["labels"],
                    "campaign": name,
                    "host": host,
                    "cell": f"{sample['labels']['cell']}#{copy}",
                }
                handle.write(json.dumps({**sample, "labels": labels}) + "\n")
    return copies * len(samples)


def index(directory, *options):
    """``platbench index DIRECTORY`` into the test's database, in a process of its own (started, not waited for)."""
    return subprocess.Popen(
        [sys.executable, "-m", "platbench", "index", str(directory), "--store", URL, *options],
        cwd=REPO,
        env={**os.environ, "PGPASSWORD": PASSWORD},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def stored(campaign):
    with psycopg.connect(URL, password=PASSWORD, connect_timeout=10) as connection:
        return connection.execute("SELECT count(*) FROM samples WHERE campaign = %s", [campaign]).fetchone()[0]


def test_the_store_in_postgresql_takes_concurrent_writers_and_loses_nothing_to_a_stopped_server(tmp_path, results_db):
    assert results_db[0].rc == 0, results_db[0].output[-3000:]
    # Two campaigns at once from two processes, and both halves of a third, each from a controller of its own.
    lines = {
        "team-a": synthetic_campaign(tmp_path / "a" / "team-a", "team-a", 40),
        "team-b": synthetic_campaign(tmp_path / "b" / "team-b", "team-b", 40),
    }
    halves = [synthetic_campaign(tmp_path / f"h{n}" / "team-shared", "team-shared", 20, f"lab-{n}") for n in (1, 2)]
    writers = [index(tmp_path / "a" / "team-a"), index(tmp_path / "b" / "team-b")]
    writers += [index(tmp_path / f"h{n}" / "team-shared") for n in (1, 2)]
    for writer in writers:
        out, err = writer.communicate(timeout=300)
        assert writer.returncode == 0, err
        assert "postgresql://platbench_test@127.0.0.1:5432/platbench_test" in out
    assert {name: stored(name) for name in lines} == lines and stored("team-shared") == sum(halves)

    # History read back from the database: each campaign's ratios, the shared one's from both controllers' cells.
    shown = subprocess.run(
        [sys.executable, "-m", "platbench", "history", "--store", URL, "--html", str(tmp_path / "history.html")],
        cwd=REPO,
        env={**os.environ, "PGPASSWORD": PASSWORD},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    print(shown.stdout)
    for name in (*lines, "team-shared"):
        assert f"\n{name} " in shown.stdout
    with psycopg.connect(URL, password=PASSWORD, connect_timeout=10) as connection:
        hosts = connection.execute("SELECT hosts FROM campaigns WHERE campaign = 'team-shared'").fetchone()
    assert hosts == ("lab-1,lab-2",)

    # The server stopped while a campaign is being written: the writer says so, naming the store without its
    # password, and nothing of the campaign is in the store; samples.jsonl is whole, and indexing it later adds all.
    big = synthetic_campaign(tmp_path / "c" / "team-c", "team-c", 300)
    version = max((row[0] for row in clusters() if row[1] == "main"), key=int)
    writer = index(tmp_path / "c" / "team-c")
    with psycopg.connect(URL, password=PASSWORD, connect_timeout=10, autocommit=True) as watcher:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and writer.poll() is None:
            writing = watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE usename = current_user AND pid <> pg_backend_pid() "
                "AND state = 'active' AND query LIKE 'COPY incoming%%'"
            ).fetchone()[0]
            if writing:
                break
            time.sleep(0.02)
        assert writer.poll() is None, "the campaign was written before the server could be stopped"
        subprocess.run(["pg_ctlcluster", version, "main", "stop", "-m", "immediate"], check=True, timeout=60)
    out, err = writer.communicate(timeout=120)
    print(err)
    assert writer.returncode == 2
    assert "the store postgresql://platbench_test@127.0.0.1:5432/platbench_test could not take campaign team-c" in err
    assert "nothing of it was written (one transaction)" in err and PASSWORD not in err
    subprocess.run(["pg_ctlcluster", version, "main", "start"], check=True, timeout=60)
    assert stored("team-c") == 0
    again = index(tmp_path / "c" / "team-c")
    out, err = again.communicate(timeout=300)
    assert again.returncode == 0, err
    assert stored("team-c") == big and f"team-c: {big} sample(s) added" in out
