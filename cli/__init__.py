"""The ``shuffler`` command line (click), installed as ``shuffler_cli``: parse, call the
core, render. See :mod:`.main` for the command registry."""
