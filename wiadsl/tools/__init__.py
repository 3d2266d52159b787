"""User-facing tools: the ``wiac`` command line and the REPL."""
