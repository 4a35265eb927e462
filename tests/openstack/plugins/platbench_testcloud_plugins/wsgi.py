"""One WSGI entry point for every API of the test cloud, for gunicorn.

``PLATBENCH_WSGI_MODULE`` names the service's own WSGI module (e.g. ``nova.wsgi.osapi_compute``)
and ``PLATBENCH_WSGI_ARGV`` the command line it should parse. The services parse ``sys.argv`` with
oslo.config when their module is imported; under gunicorn that is gunicorn's own command line,
which they reject, so it is replaced before the import.
"""

import importlib
import os
import shlex
import sys

sys.argv = shlex.split(os.environ["PLATBENCH_WSGI_ARGV"])
application = importlib.import_module(os.environ["PLATBENCH_WSGI_MODULE"]).application
