"""``shuffler-setup``: the machine's installer (docs/deploy/README.md). Its commands are
:mod:`.main`'s; every file it makes is listed in a manifest (:mod:`.manifest`), so
``uninstall`` removes exactly those.

Everything is under a root (``--root`` or ``SHUFFLER_SYSTEM_ROOT``, ``/`` unless given):
a throwaway one in the tests, an image's tree in its build. Without a running systemd
(a chroot, a tree) nothing is reloaded or restarted, and the output says so.
"""
