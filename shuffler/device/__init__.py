"""The device contract (:mod:`shuffler.device.contract`) every backend implements, the
pass engine that decides card by card with no I/O (:mod:`~shuffler.device.engine`),
the injected clocks (:mod:`~shuffler.device.clock`) and the registry that finds a
backend by name (:mod:`~shuffler.device.registry`, the ``shuffler.devices`` entry points).

May import: shuffler.core, shuffler.errors, shuffler.logs, shuffler.files.
"""
