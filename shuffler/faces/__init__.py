"""The service's faces: the dealer's page (:mod:`shuffler.faces.web`), MQTT telemetry and
the tables view, phone pairing, and the router that feeds them what the service
publishes (:mod:`~shuffler.faces.router`, through :class:`shuffler.service.hub.Hub`).

May import: shuffler.service and everything below it.
"""
