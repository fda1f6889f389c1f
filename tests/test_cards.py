import itertools
import random

import pytest

from shuffler.core.cards import (
    JOKER,
    Card,
    Suit,
    effective_suit,
    euchre_gathered_pack,
    legal_plays,
    play_euchre_hand,
    standard_pack,
    trick_strength,
)
from shuffler.errors import BadInputError


@pytest.mark.parametrize(("n", "lowest"), [(24, "9"), (28, "8"), (32, "7"), (52, "2")])
def test_named_packs(n, lowest):
    pack = standard_pack(n)
    assert len(pack) == len(set(pack)) == n
    assert min(pack, key=lambda c: ["2", "3", "4", "5", "6", "7", "8", "9", "10", "J", "Q", "K",
                                    "A"].index(c.rank)).rank == lowest


def test_euchre_plus_joker_and_two_decks():
    assert standard_pack(25)[-1] is JOKER and len(set(standard_pack(25))) == 25
    two = standard_pack(104)
    assert len(set(two)) == 104
    assert Card("A", Suit.SPADES, 0) in two and Card("A", Suit.SPADES, 1) in two
    assert str(Card("A", Suit.SPADES, 1)) == "AS#2"


@pytest.mark.parametrize("bad", [0, 105, -1, True])
def test_a_load_outside_1_to_104_is_refused(bad):
    with pytest.raises(BadInputError, match="1 to 104"):
        standard_pack(bad)


def test_the_left_bower_is_trump_and_ranks_second():
    trump = Suit.HEARTS
    right, left = Card("J", Suit.HEARTS), Card("J", Suit.DIAMONDS)
    ace = Card("A", Suit.HEARTS)
    assert effective_suit(left, trump) is Suit.HEARTS
    assert trick_strength(right, trump, Suit.CLUBS) > trick_strength(left, trump, Suit.CLUBS)
    assert trick_strength(left, trump, Suit.CLUBS) > trick_strength(ace, trump, Suit.CLUBS)
    # diamonds led: the left bower does not follow diamonds
    hand = [left, Card("9", Suit.CLUBS)]
    assert legal_plays(hand, trump, Suit.DIAMONDS) == hand  # void in diamonds: anything
    assert legal_plays(hand, trump, Suit.HEARTS) == [left]  # hearts led: must play the bower


@pytest.mark.parametrize("seed", range(40))
def test_a_gathered_euchre_pack_is_24_distinct_cards_from_a_legal_hand(seed):
    hand = play_euchre_hand(random.Random(seed), lone=seed % 4 == 0)
    pack = hand.gathered()
    assert len(pack) == 24 and set(pack) == set(standard_pack(24))
    players = 3 if hand.idle else 4
    assert all(len(t) == players for t in hand.tricks)
    trump = hand.trump
    held = [set(h) for h in hand.holdings]
    leader = None
    for trick, winner in zip(hand.plays, hand.winners, strict=True):
        if leader is not None:
            assert trick[0][0] == leader, "the winner of a trick leads the next"
        led = effective_suit(trick[0][1], trump)
        for seat, card in trick:
            assert card in held[seat]
            if effective_suit(card, trump) is not led:  # a revoke would break this
                assert all(effective_suit(c, trump) is not led for c in held[seat])
            held[seat].remove(card)
        best = max(trick, key=lambda sc: trick_strength(sc[1], trump, led))
        assert best[0] == winner
        leader = winner
    assert {c for h in held for c in h} == set(hand.idle)  # only the idle hand is left


def test_gathered_packs_are_clumped_by_suit():
    rng = random.Random(1)
    same = total = 0
    for _ in range(200):
        pack = euchre_gathered_pack(rng)
        same += sum(a.suit == b.suit for a, b in itertools.pairwise(pack))
        total += len(pack) - 1
    # a random 24-card pack has 5/23 = 0.22 same-suit neighbours; tricks follow suit
    assert same / total > 0.3
