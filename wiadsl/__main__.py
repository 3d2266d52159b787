"""``python -m wiadsl``: the ``wiac`` command line."""

import sys

from .tools.cli import main

sys.exit(main())
