"""``shuffler serve``: the deciding loop (:mod:`shuffler.service.loop`), the request
declaration (:mod:`~shuffler.service.request`), the socket's connections, the typed
events, the client the CLI uses, and the interfaces its faces meet it through
(:mod:`~shuffler.service.hub`).

May import: shuffler.control and everything below it; never shuffler.faces.
"""
