"""The service's faces: the dealer's page (:mod:`shuffler.faces.web`) and the panel it
draws, MQTT telemetry and the tables view, phone pairing, and the router that feeds them
what the service publishes (:mod:`~shuffler.faces.router`, through
:class:`shuffler.service.hub.Hub`).

May import: shuffler.service (what a face is handed from below, shuffler.service.hub names),
and the utilities under every layer (errors, logs, files, schemas); nothing else below the
service (pyproject's faces contract).
"""
