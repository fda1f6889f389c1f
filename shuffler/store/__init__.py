"""The state folder: the counters and latched fault (:mod:`shuffler.store.state`), the
audit log of every pass (:mod:`~shuffler.store.audit`) and the machine's lock
(:mod:`~shuffler.store.lock`).

May import: shuffler.device, shuffler.core, shuffler.files, shuffler.errors.
"""
