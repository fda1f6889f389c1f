"""The ``shuffler`` command line (click): parse, call the core, render."""
