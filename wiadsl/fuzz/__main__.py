"""``python -m wiadsl.fuzz --seed S --count N``: see ``wiadsl.fuzz.cli``."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main(prog="python -m wiadsl.fuzz"))
