"""What one pass does to a pack. Pure.

A pass feeds the cards one at a time (from the top or the bottom of the tray)
and drops each on top of the left (label 0) or the right (label 1) pile; the
dealer then puts one pile on top of the other. Packs are lists, top card first;
``labels[i]`` is the pile of the i-th card *fed*.

    >>> deal_pass("ABCD", [0, 1, 0, 1], Feed.BOTTOM, Pile.LEFT)
    ['B', 'D', 'A', 'C']
    >>> deal_pass("ABCD", [0, 1, 0, 1], Feed.TOP, Pile.LEFT)
    ['C', 'A', 'D', 'B']
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from itertools import compress
from operator import not_
from typing import TypeVar

T = TypeVar("T")


class Pile(enum.IntEnum):
    LEFT = 0
    RIGHT = 1

    @property
    def other(self) -> Pile:
        return _BY_LABEL[1 - self]

    @staticmethod
    def of(label: int) -> Pile:
        """The pile of a label (0 or 1; anything else is a KeyError): ``Pile(label)``
        without the enum's lookup, which the exhaustive walks call millions of times."""
        return _BY_LABEL[label]


_BY_LABEL = {0: Pile.LEFT, 1: Pile.RIGHT}


class Stacked(enum.Enum):
    """How a pass's stacking came about, as the pile sensors and the dealer's gestures
    saw it: the hand's record of each pass (``PassRecord.stacked``, ``stacked`` in the
    JSON). The light asks for one pile on top; the machine warns at once when the first
    pile lifted is the other one and starts no pass, nor ends the hand after its last
    pass, until the stack matches the light (docs/guide.md): a finished pass is
    ``FOLLOWED`` or ``CORRECTED``."""

    FOLLOWED = "followed"  # the pile the light showed went on top, first time
    CORRECTED = "corrected"  # the other pile was lifted first, put back, then as the light
    #: warned of and not (yet) corrected: a stack no pass goes on from
    IGNORED = "ignored"
    UNKNOWN = "unknown"  # the sensors could not tell (both piles at once, or one seen)


class Feed(enum.Enum):
    """Which card of the tray the feed roller takes first."""

    TOP = "top"
    BOTTOM = "bottom"


def feed_order(pack: Sequence[T], feed: Feed) -> list[T]:
    """The cards in the order they pass the gate."""
    return list(pack) if feed is Feed.TOP else list(reversed(pack))


def deal_piles(pack: Sequence[T], labels: Sequence[int], feed: Feed) -> tuple[list[T], list[T]]:
    """The left and right piles (each top first) after dealing ``pack`` by ``labels``."""
    if len(labels) != len(pack):
        raise ValueError(f"{len(labels)} labels for {len(pack)} cards")
    fed = feed_order(pack, feed)
    # each card lands on top of its pile, so a pile reads top first in reverse feed order
    left = list(compress(fed, map(not_, labels)))
    right = list(compress(fed, labels))
    return left[::-1], right[::-1]


def stack(piles: tuple[Sequence[T], Sequence[T]], on_top: Pile) -> list[T]:
    """The pack after the dealer puts pile ``on_top`` on the other one."""
    return [*piles[on_top], *piles[on_top.other]]


def deal_pass(pack: Sequence[T], labels: Sequence[int], feed: Feed, on_top: Pile) -> list[T]:
    """One whole pass: deal by ``labels``, then stack with ``on_top`` above."""
    return stack(deal_piles(pack, labels, feed), on_top)


def pile_sizes(labels: Sequence[int]) -> tuple[int, int]:
    right = sum(labels)
    return len(labels) - right, right
