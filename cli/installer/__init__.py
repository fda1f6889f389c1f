"""``shuffler-setup``: the machine's installer (docs/deploy/README.md).

``install`` puts in place what the service needs, matched to the config: the account
and its groups, the udev rules, the unit and the drop-ins the config calls for, SPI on
Raspberry Pi OS, the config (only if absent) and the state folder; every file it makes
is listed in a manifest (:mod:`.manifest`), so ``uninstall`` removes exactly those.
``upgrade`` does the same with the package's new files and starts the service again;
``status`` compares; ``backup`` and ``restore`` carry the state folder.

Everything is under a root (``--root`` or ``SHUFFLER_SYSTEM_ROOT``, ``/`` unless given):
a throwaway one in the tests, an image's tree in its build. Without a running systemd
(a chroot, a tree) nothing is reloaded or restarted, and the output says so.
"""
