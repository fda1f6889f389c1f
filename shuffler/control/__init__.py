"""Control of passes and hands: the pass controller (battery, latches, the audit line),
the hand runner, the session the CLI and the service drive, reports, the score book,
the dealer's words the terminal and the page both say, and the signal policy (the motor
off on exit).

May import: shuffler.config, shuffler.store, shuffler.device, shuffler.core and below.
"""
