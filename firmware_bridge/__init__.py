"""The serial link to a shuffler whose motors sit behind a microcontroller.

Not built yet: see the project's issue on the firmware bridge. ``--device
serial:PORT`` says so with exit code 2.
"""
