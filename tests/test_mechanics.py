"""One pass, worked by hand on a five-card pack A..E (top first)."""

import pytest

from shuffler.core.mechanics import Feed, Pile, deal_pass, deal_piles, pile_sizes, stack

PACK = list("ABCDE")
LABELS = [0, 1, 1, 0, 1]  # by feed order: the first card fed goes left, ...


def test_top_feed_reverses_each_pile():
    # fed A B C D E; left gets A then D -> pile D A; right gets B C E -> pile E C B
    assert deal_piles(PACK, LABELS, Feed.TOP) == (list("DA"), list("ECB"))


def test_bottom_feed_keeps_each_pile_in_order():
    # fed E D C B A; left gets E then B -> pile B E; right gets D C A -> pile A C D
    assert deal_piles(PACK, LABELS, Feed.BOTTOM) == (list("BE"), list("ACD"))


@pytest.mark.parametrize(("feed", "on_top", "expected"), [
    (Feed.TOP, Pile.LEFT, "DAECB"),
    (Feed.TOP, Pile.RIGHT, "ECBDA"),
    (Feed.BOTTOM, Pile.LEFT, "BEACD"),
    (Feed.BOTTOM, Pile.RIGHT, "ACDBE"),
])
def test_a_whole_pass_for_both_feeds_and_both_stackings(feed, on_top, expected):
    assert "".join(deal_pass(PACK, LABELS, feed, on_top)) == expected


def test_all_cards_to_one_pile_with_top_feed_reverses_the_pack():
    assert deal_pass(PACK, [0] * 5, Feed.TOP, Pile.LEFT) == PACK[::-1]
    assert deal_pass(PACK, [0] * 5, Feed.BOTTOM, Pile.RIGHT) == PACK


def test_stack_and_pile_sizes():
    assert stack((["x"], ["y", "z"]), Pile.RIGHT) == ["y", "z", "x"]
    assert pile_sizes(LABELS) == (2, 3)


def test_labels_must_match_the_pack():
    with pytest.raises(ValueError, match="4 labels for 5 cards"):
        deal_piles(PACK, LABELS[:4], Feed.TOP)


def test_a_pile_from_its_label_and_the_other_pile():
    assert [Pile.of(0), Pile.of(1)] == [Pile(0), Pile(1)] == [Pile.LEFT, Pile.RIGHT]
    assert (Pile.LEFT.other, Pile.RIGHT.other) == (Pile.RIGHT, Pile.LEFT)
    for bad in (-1, 2, True + 1):
        with pytest.raises(KeyError):
            Pile.of(bad)
