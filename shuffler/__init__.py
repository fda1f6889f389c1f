"""Controller for a single-touch, two-pile card shuffler.

The pure core (:mod:`cards`, :mod:`mechanics`, :mod:`planning`, :mod:`mixing`,
:mod:`battery`) does no I/O; the device contract lives in :mod:`shuffler.device`.
"""

__version__ = "0.1.0"
