"""``python -m jitbridge``: the command line (see jitbridge.cli)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
