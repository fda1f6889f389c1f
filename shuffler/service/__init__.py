"""``shuffler serve``: the deciding loop (:mod:`shuffler.service.loop`), which puts the
rest together: the wire (:mod:`~shuffler.service.protocol`, the request declaration
:mod:`~shuffler.service.request`), the socket (:mod:`~shuffler.service.listening`,
:mod:`~shuffler.service.connections`), :mod:`~shuffler.service.systemd`, the typed
events, the client the CLI uses, and the interfaces its faces meet it through
(:mod:`~shuffler.service.hub`); none of those imports the loop.

May import: shuffler.control and everything below it; never shuffler.faces.
"""
