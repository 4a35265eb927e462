"""python -m tests.openstack.testcloud up|down|status"""

import argparse
import json
import sys

from . import cloud
from .layout import Layout
from .processes import CloudError


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m tests.openstack.testcloud", description=__doc__)
    parser.add_argument("action", choices=("up", "down", "status"))
    action = parser.parse_args(argv).action
    layout = Layout.from_env()
    try:
        if action == "up":
            cloud.up(layout)
        elif action == "down":
            cloud.down(layout)
        else:
            print(json.dumps(cloud.status(layout), indent=2))
    except CloudError as error:
        print(f"test cloud {action}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
