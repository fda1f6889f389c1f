"""Controller for a single-touch, two-pile card shuffler.

Subpackages, each importing only those below it (docs/architecture.md; the
``[tool.importlinter]`` contracts check it): :mod:`~shuffler.faces` (the page, MQTT),
:mod:`~shuffler.service` (``shuffler serve``), :mod:`~shuffler.control` (passes and
hands), :mod:`~shuffler.gpio` (the gpiozero backend), :mod:`~shuffler.store` (the state
folder), :mod:`~shuffler.device` (the contract, the pass engine, the clock, the registry)
and :mod:`~shuffler.core` (pure: cards, mechanics, planning, mixing, battery, score).
"""

__version__ = "0.2.0"
