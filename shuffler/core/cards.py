"""Cards, the packs the machine takes, and a pack as it comes back from a euchre hand.

Pure: no I/O. Randomness, where needed (playing out a hand for studies), comes
from the ``rng`` argument, a :class:`random.Random`-like object.

    >>> pack = standard_pack(24)
    >>> len(pack), str(pack[0]), str(pack[-1])
    (24, '9C', 'AS')
    >>> len(set(standard_pack(104)))
    104
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from shuffler.constants import MAX_CARDS
from shuffler.errors import BadInputError

RANKS = ("2", "3", "4", "5", "6", "7", "8", "9", "10", "J", "Q", "K", "A")


class Suit(enum.Enum):
    CLUBS = "C"
    DIAMONDS = "D"
    HEARTS = "H"
    SPADES = "S"

    @property
    def red(self) -> bool:
        return self in (Suit.DIAMONDS, Suit.HEARTS)

    @property
    def partner(self) -> Suit:
        """The other suit of the same colour (the left bower's printed suit)."""
        return {
            Suit.CLUBS: Suit.SPADES,
            Suit.SPADES: Suit.CLUBS,
            Suit.HEARTS: Suit.DIAMONDS,
            Suit.DIAMONDS: Suit.HEARTS,
        }[self]


@dataclass(frozen=True)
class Card:
    """One card. ``deck`` tells apart the two copies in a 104-card load."""

    rank: str
    suit: Suit | None  # None only for the joker
    deck: int = 0

    def __str__(self) -> str:
        name = "JOKER" if self.suit is None else f"{self.rank}{self.suit.value}"
        return f"{name}#{self.deck + 1}" if self.deck else name


JOKER = Card("JOKER", None)


def _deck(low_rank: str, deck: int = 0) -> list[Card]:
    ranks = RANKS[RANKS.index(low_rank) :]
    return [Card(rank, suit, deck) for suit in Suit for rank in ranks]


def standard_pack(n: int) -> list[Card]:
    """The pack of ``n`` cards in new-pack order (top first).

    24: nine to ace; 25: the same plus the joker; 28: eights up; 32: sevens up;
    52: a full deck; 104: two full decks, the second marked ``deck=1``. Any other
    count is the first ``n`` cards of two decks, for tests and odd loads.
    """
    check_card_count(n)
    if n == 24:
        return _deck("9")
    if n == 25:
        return [*_deck("9"), JOKER]
    if n == 28:
        return _deck("8")
    if n == 32:
        return _deck("7")
    return (_deck("2") + _deck("2", 1))[:n]


def check_card_count(n: int, where: str = "cards") -> int:
    """Return ``n`` if the machine can take that many cards, else raise a clear error."""
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_CARDS:
        raise BadInputError(f"{where}: the machine takes 1 to {MAX_CARDS} cards, got {n!r}")
    return n


# --- euchre ---------------------------------------------------------------


class RandomLike(Protocol):
    def random(self) -> float: ...
    def shuffle(self, x: list) -> None: ...
    def choice(self, seq: Sequence): ...


_PLAIN_ORDER = ("9", "10", "J", "Q", "K", "A")


def effective_suit(card: Card, trump: Suit) -> Suit:
    """The suit a card plays as: the left bower is trump, not its printed suit."""
    assert card.suit is not None
    if card.rank == "J" and card.suit is trump.partner:
        return trump
    return card.suit


def trick_strength(card: Card, trump: Suit, led: Suit) -> int:
    """Higher wins. Right bower > left bower > trump A..9 > led suit A..9 > the rest."""
    suit = effective_suit(card, trump)
    if suit is trump:
        if card.rank == "J":
            return 200 if card.suit is trump else 199
        return 100 + _PLAIN_ORDER.index(card.rank)
    if suit is led:
        return 50 + _PLAIN_ORDER.index(card.rank)
    return 0


def legal_plays(hand: Sequence[Card], trump: Suit, led: Suit | None) -> list[Card]:
    """Cards that may be played: any if leading or void in the led suit, else the led suit."""
    if led is None:
        return list(hand)
    follow = [c for c in hand if effective_suit(c, trump) is led]
    return follow or list(hand)


@dataclass(frozen=True)
class EuchreHand:
    """A played hand: each trick as (seat, card) plays in order, the kitty and any idle hand."""

    trump: Suit
    holdings: tuple[tuple[Card, ...], ...]  # each seat's five cards as play began
    plays: tuple[tuple[tuple[int, Card], ...], ...]
    winners: tuple[int, ...]
    kitty: tuple[Card, ...]
    idle: tuple[Card, ...] = ()

    @property
    def tricks(self) -> tuple[tuple[Card, ...], ...]:
        return tuple(tuple(card for _, card in trick) for trick in self.plays)

    def gathered(self) -> list[Card]:
        """The pack as the dealer gathers it, top first: the tricks, the kitty, the idle hand."""
        return [c for t in self.tricks for c in t] + list(self.kitty) + list(self.idle)


def play_euchre_hand(rng: RandomLike, *, dealer: int = 0, lone: bool | None = None) -> EuchreHand:
    """Deal 24 cards (2-3 / 3-2), make trump, and play five legal tricks.

    Players pick a random legal card, so suits cluster the way they do at a
    real table: each trick is mostly the led suit. ``lone`` forces (or forbids)
    a lone hand; by default one hand in ten is played alone.
    """
    deck = _deck("9")
    rng.shuffle(deck)
    hands: list[list[Card]] = [[] for _ in range(4)]
    pos = 0
    for packet in ((2, 3, 2, 3), (3, 2, 3, 2)):
        for i, size in enumerate(packet):
            seat = (dealer + 1 + i) % 4
            hands[seat].extend(deck[pos : pos + size])
            pos += size
    kitty = deck[pos:]
    upcard = kitty[0]
    maker = (dealer + 1 + int(rng.random() * 4)) % 4
    trump: Suit
    if rng.random() < 0.6:  # ordered up: the dealer takes the upcard and discards
        assert upcard.suit is not None
        trump = upcard.suit
        hands[dealer].append(upcard)
        discard = min(hands[dealer], key=lambda c: trick_strength(c, trump, trump))
        hands[dealer].remove(discard)
        kitty = [*kitty[1:], discard]
    else:
        trump = rng.choice([s for s in Suit if s is not upcard.suit])
    alone = (rng.random() < 0.1) if lone is None else lone
    idle_seat = (maker + 2) % 4 if alone else None
    idle = tuple(hands[idle_seat]) if idle_seat is not None else ()
    holdings = tuple(tuple(h) for h in hands)
    leader = (dealer + 1) % 4
    if leader == idle_seat:
        leader = (leader + 1) % 4
    tricks, winners = [], []
    for _ in range(5):
        played: list[tuple[int, Card]] = []
        led: Suit | None = None
        for step in range(4):
            seat = (leader + step) % 4
            if seat == idle_seat:
                continue
            card = rng.choice(legal_plays(hands[seat], trump, led))
            hands[seat].remove(card)
            if led is None:
                led = effective_suit(card, trump)
            played.append((seat, card))
        assert led is not None
        leader = max(played, key=lambda sc: trick_strength(sc[1], trump, led))[0]
        tricks.append(tuple(played))
        winners.append(leader)
    return EuchreHand(trump, holdings, tuple(tricks), tuple(winners), tuple(kitty), idle)


def euchre_gathered_pack(rng: RandomLike, **kwargs) -> list[Card]:
    """A 24-card pack in the clumped order it comes back in after a euchre hand."""
    return play_euchre_hand(rng, **kwargs).gathered()
