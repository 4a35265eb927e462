"""platbench's test cloud: a real OpenStack control plane on 127.0.0.1, started from PyPI.

``python -m tests.openstack.testcloud up|down|status`` (from the repository root); see the README
section "The test cloud". One module per concern: ``layout`` (paths, ports), ``install`` (venv,
Debian packages), ``backing`` (MariaDB, RabbitMQ), ``configs`` (service configuration),
``processes`` (start, wait, stop by PID), ``bootstrap`` (databases, keystone, cells), ``cloud``
(up/down/status).
"""
