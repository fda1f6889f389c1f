"""The pure core: cards and packs, pass mechanics, plans, mixing maths, statistics,
the battery's discharge curves and the euchre score. No I/O, no threads, no clocks.

May import: shuffler.errors only (and the standard library).
"""
