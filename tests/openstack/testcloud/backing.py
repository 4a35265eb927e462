"""MariaDB and RabbitMQ, run from the Debian packages' binaries with their data in the state dir,
listening on 127.0.0.1 only (Erlang's port mapper and distribution port included)."""

import subprocess

from . import processes
from .layout import DATABASES, HOST
from .processes import CloudError

RABBITMQ_SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"  # the Debian wrapper in /usr/sbin would su to rabbitmq
EPMD = "epmd"


def mysql_config(layout):
    datadir = layout.data_dir / "mysql"
    return f"""[mysqld]
user = root
datadir = {datadir}
socket = {layout.mysql_socket()}
pid-file = {layout.run_dir / "mysqld.pidfile"}
bind-address = {HOST}
port = {layout.port("mysql")}
skip-name-resolve
skip-log-bin
max_connections = 1000
character-set-server = utf8mb4
collation-server = utf8mb4_general_ci
# A scratch database: durability is not worth the fsyncs.
innodb_flush_log_at_trx_commit = 0
innodb_doublewrite = 0
innodb_buffer_pool_size = 128M
innodb_log_file_size = 64M
log-error = {layout.log_dir / "mysqld-error.log"}
"""


def start_mysql(layout):
    conf = layout.etc_dir / "my.cnf"
    conf.parent.mkdir(parents=True, exist_ok=True)
    conf.write_text(mysql_config(layout))
    datadir = layout.data_dir / "mysql"
    datadir.mkdir(parents=True, exist_ok=True)
    layout.log_dir.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        ["mariadb-install-db", f"--defaults-file={conf}", "--auth-root-authentication-method=socket", "--skip-test-db"],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        log = layout.log_dir / "mysqld-error.log"  # log-error: where mariadbd's own complaint goes
        raise CloudError(
            f"mariadb-install-db failed for {datadir}:\n{result.stdout[-1500:]}{result.stderr[-1500:]}\n"
            f"Last lines of {log}:\n{processes.log_tail(log)}"
        )
    argv = ["mariadbd", f"--defaults-file={conf}"]
    processes.start_listening(layout, "mysqld", argv, layout.port("mysql"), log=layout.log_dir / "mysqld-error.log")


def create_databases(layout, password):
    """One database per service, all reached by one loopback user (the password is generated per cloud)."""
    statements = [f"CREATE USER 'openstack'@'{HOST}' IDENTIFIED BY '{password}';"]
    for name in DATABASES:
        statements.append(f"CREATE DATABASE {name} CHARACTER SET utf8mb4;")
    statements.append(f"GRANT ALL PRIVILEGES ON *.* TO 'openstack'@'{HOST}';")
    result = subprocess.run(
        ["mariadb", f"--socket={layout.mysql_socket()}", "-uroot"],
        input="\n".join(statements),
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise CloudError(f"creating the databases failed: {result.stderr[-1500:]}")


def rabbitmq_env(layout):
    base = layout.data_dir / "rabbitmq"
    return {
        "HOME": str(base),  # the Erlang cookie lives here, not in root's home
        "RABBITMQ_CONF_ENV_FILE": str(layout.etc_dir / "rabbitmq-env.conf"),
        "RABBITMQ_CONFIG_FILE": str(layout.etc_dir / "rabbitmq.conf"),
        "RABBITMQ_ENABLED_PLUGINS_FILE": str(layout.etc_dir / "rabbitmq-enabled-plugins"),
        "RABBITMQ_NODENAME": f"platbench{layout.port_base}@localhost",
        "RABBITMQ_NODE_IP_ADDRESS": HOST,
        "RABBITMQ_NODE_PORT": str(layout.port("rabbitmq")),
        "RABBITMQ_DIST_PORT": str(layout.port("rabbitmq_dist")),
        "RABBITMQ_MNESIA_BASE": str(base / "mnesia"),
        "RABBITMQ_LOG_BASE": str(layout.log_dir / "rabbitmq"),
        "RABBITMQ_PID_FILE": str(layout.run_dir / "rabbitmq.pidfile"),
        "ERL_EPMD_ADDRESS": HOST,
        "ERL_EPMD_PORT": str(layout.port("epmd")),
        # Erlang's distribution listener binds every address unless told otherwise.
        "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
    }


def start_rabbitmq(layout, password):
    etc = layout.etc_dir
    etc.mkdir(parents=True, exist_ok=True)
    (etc / "rabbitmq-env.conf").write_text("")
    (etc / "rabbitmq-enabled-plugins").write_text("[].\n")
    conf = etc / "rabbitmq.conf"
    conf.touch(mode=0o600)
    conf.write_text(f"default_user = openstack\ndefault_pass = {password}\nloopback_users = none\n")
    env = rabbitmq_env(layout)
    for key in ("HOME", "RABBITMQ_MNESIA_BASE", "RABBITMQ_LOG_BASE"):
        (layout.state_dir / env[key]).mkdir(parents=True, exist_ok=True)
    # Our own port mapper, in the foreground, so it is recorded and stopped like the rest.
    epmd = [EPMD, "-address", HOST, "-port", env["ERL_EPMD_PORT"]]
    processes.start_listening(layout, "epmd", epmd, layout.port("epmd"), timeout=20)
    processes.start_listening(layout, "rabbitmq", [RABBITMQ_SERVER], layout.port("rabbitmq"), env=env)


def rabbitmq_log_tail(layout):
    """The tail of RabbitMQ's own log files (its console output is in rabbitmq.log)."""
    logs = sorted((layout.log_dir / "rabbitmq").glob("*.log"))
    tails = [f"Last lines of {log}:\n{processes.log_tail(log)}" for log in logs]
    return "\n".join(tails) or f"(RabbitMQ wrote no log file in {layout.log_dir / 'rabbitmq'})"


def transport_url(layout, password):
    return f"rabbit://openstack:{password}@{HOST}:{layout.port('rabbitmq')}/"


def database_url(layout, password, name):
    return f"mysql+pymysql://openstack:{password}@{HOST}:{layout.port('mysql')}/{name}?charset=utf8mb4"
