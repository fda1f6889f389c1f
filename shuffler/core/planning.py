"""Pass plans: which pile each card goes to.

Plans draw from the OS CSPRNG (:class:`secrets.SystemRandom`) unless the caller
hands in another source, which only the simulator does (for reproducible runs).
A plan is a secret: anyone who reads it knows the deck. Its ``repr`` hides the
labels, and nothing in this package logs, stores or prints them.

    >>> plan = coin_plan(24)
    >>> plan
    PassPlan(cards=24, on_top=LEFT)
    >>> sum(plan.pile_sizes) == 24
    True
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from shuffler.core.cards import check_card_count
from shuffler.core.mechanics import Feed, Pile, deal_pass, feed_order, pile_sizes

if TYPE_CHECKING:
    from fractions import Fraction

# secrets and .mixing (exact fractions) are imported where a plan or a distance is
# made: ``status`` and the config need only Mode and default_passes from here


class RandomSource(Protocol):
    """What a planner needs from a random source (``secrets.SystemRandom`` has it)."""

    def getrandbits(self, k: int, /) -> int: ...
    def randrange(self, start: int, stop: int | None = None, /) -> int: ...


def system_random() -> RandomSource:
    """The production source: the operating system's CSPRNG."""
    import secrets

    return secrets.SystemRandom()


def default_passes(cards: int) -> int:
    """Passes a hand unless told otherwise: the fewest k with 2^k ≥ cards (5 for 24
    cards, 6 for 52, 7 for 104). Every card then gets its own code in planned mode, so
    the pack ends exactly random whichever pile the dealer puts on top, so long as the
    sensors see it and the choice does not depend on how the cards fell (a dealer who
    looks at them can steer it up to 1 − 2^−k; the taller pile is always the one the
    light shows). One fewer pass (4 for 24 cards) is 0.0021 from random when the dealer
    follows the light, but up to a pass's worth of mixing worse for a dealer who does
    not (docs/mixing.md).

        >>> default_passes(24), default_passes(32), default_passes(52), default_passes(104)
        (5, 5, 6, 7)
    """
    check_card_count(cards)
    return max(1, (cards - 1).bit_length())


class Mode(enum.Enum):
    """How labels are chosen: ``coin`` flips a fair coin per card (the plain
    machine); ``planned`` chooses them to reach the physical limit."""

    COIN = "coin"
    PLANNED = "planned"


@dataclass(frozen=True, repr=False)
class PassPlan:
    """The labels for one pass, in feed order (0 = left pile, 1 = right pile),
    and the pile the dealer will be asked to put on top afterwards."""

    labels: tuple[int, ...]
    on_top: Pile = Pile.LEFT
    _sizes: tuple[int, int] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        if not set(self.labels) <= {0, 1}:
            raise ValueError("a pass plan holds only the labels 0 and 1")
        object.__setattr__(self, "_sizes", pile_sizes(self.labels))

    @property
    def cards(self) -> int:
        return len(self.labels)

    @property
    def pile_sizes(self) -> tuple[int, int]:
        return self._sizes

    def __repr__(self) -> str:  # never show the labels
        return f"PassPlan(cards={self.cards}, on_top={self.on_top.name})"

    __str__ = __repr__


def coin_plan(cards: int, rng: RandomSource | None = None, on_top: Pile = Pile.LEFT) -> PassPlan:
    """One fair, independent coin per card: an inverse GSR riffle."""
    check_card_count(cards)
    bits = (rng or system_random()).getrandbits(cards)
    return PassPlan(tuple((bits >> i) & 1 for i in range(cards)), on_top)


class PackTracker:
    """Where every card is: ids in current order, top first.

    Ids are start positions (0 = top) while the controller has followed every
    card from the start of the hand. The controller knows the order from its
    own labels and the stacking the pile sensors saw; a count other than
    planned, or a stacking it could not see, loses track (``order`` becomes
    None). :meth:`rebase` starts afresh with current positions as ids.
    """

    def __init__(self, cards: int, feed: Feed) -> None:
        self.cards = cards
        self.feed = feed
        self.order: list[int] | None = list(range(cards))
        self.from_start = True  # ids are still the starting positions

    @property
    def known(self) -> bool:
        return self.order is not None

    def after_pass(self, plan: PassPlan, counted: int, stacking: Pile | None) -> None:
        if self.order is None:
            return
        if counted != plan.cards or stacking is None or len(self.order) != plan.cards:
            self.order = None
            self.from_start = False
            return
        self.order = deal_pass(self.order, plan.labels, self.feed, stacking)

    def rebase(self) -> list[int]:
        """Forget the ids: number the cards by where they are now."""
        self.order = list(range(self.cards))
        self.from_start = False
        return self.order


class Planner(Protocol):
    """Chooses each pass's labels; the seam between coin and planned mode."""

    mode: Mode

    def plan(self, index: int, cards: int, tracker: PackTracker) -> PassPlan: ...

    def observe(self, index: int, plan: PassPlan, counted: int, stacking: Pile | None) -> None:
        """What the pass did: the count and the stacking the sensors saw (None: unseen)."""

    def distance(self, cards: int, passes_done: int) -> Fraction | None:
        """Total variation from uniform that holds after pass ``passes_done`` (counted
        from the start of the hand) whatever rule the dealer stacks by: exact if
        :attr:`exact`, else an upper bound; None: nothing can be said."""

    @property
    def exact(self) -> bool:
        """Whether :meth:`distance` is the distance itself rather than a bound."""

    @property
    def departures(self) -> tuple[int, ...]:
        """Passes (1-based) after which the sensors saw another pile on top than the
        light showed, or could not tell which."""


class _Departures:
    """What the dealer did other than the light said, as the sensors saw it.

    A dealer may choose the pile by looking at the cards (the taller pile, the pile the
    last card fell on), and such a choice depends on the plan: the guarantee of a plan
    holds for stackings chosen independently of it. The controller holds every stack to
    the light, so a hand it finishes never departs; a departure is what a model of a
    failed sensor tells the planner (hardware-sim/study.py), and its hand carries the bound
    of last resort, :func:`~shuffler.core.mixing.tv_any`: given that the hand departed, and
    the departure may have been chosen by the cards, nothing better holds (docs/mixing.md,
    "Dealers who look at the cards").
    """

    def __init__(self) -> None:
        self._off: list[int] = []  # 0-based passes

    def note(self, index: int, plan: PassPlan, stacking: Pile | None) -> bool:
        off = stacking is not plan.on_top
        if off:
            self._off.append(index)
        return off

    @property
    def departures(self) -> tuple[int, ...]:
        return tuple(j + 1 for j in self._off)



class CoinPlanner(_Departures):
    """The plain machine: a fair coin per card, whatever the pack looks like.

    Every fault-free pass is a fresh inverse riffle, independent of the order it
    finds and of a stacking chosen without looking (the other pile on top only swaps
    the coin's faces), so neither a lost track nor an unseen stacking costs anything
    then. A pass with a count mismatch (a double feed) is some other random
    permutation. Independent random permutations before and after a run of m ideal
    passes cannot bring the pack nearer to uniform than those m passes leave it, so the
    distance is at most that of the longest run of fault-free passes.

    A hand that departed from the light carries the bound of last resort (see
    :class:`_Departures`).
    """

    mode = Mode.COIN

    def __init__(self, rng: RandomSource | None = None) -> None:
        super().__init__()
        self.rng = rng or system_random()
        self._first: int | None = None  # the first pass this planner dealt (0 unless resumed)
        self._run = self._best = 0  # fault-free passes in a row: now, and the longest
        self._faulty = False

    def plan(self, index: int, cards: int, tracker: PackTracker) -> PassPlan:
        if self._first is None:
            self._first = index
        return coin_plan(cards, self.rng)

    def observe(self, index: int, plan: PassPlan, counted: int, stacking: Pile | None) -> None:
        self.note(index, plan, stacking)
        if counted != plan.cards:
            self._faulty, self._run = True, 0
        else:
            self._run += 1
            self._best = max(self._best, self._run)

    @property
    def exact(self) -> bool:
        return not self._faulty and not self._first and not self.departures

    def distance(self, cards: int, passes_done: int) -> Fraction | None:
        from shuffler.core.mixing import tv_coin

        if self.departures:
            from shuffler.core.mixing import tv_any

            return tv_any(cards)
        if self.exact:
            return tv_coin(cards, passes_done)
        return tv_coin(cards, self._best)


# -- planned mode ---------------------------------------------------------------

def _weighted_index(weights: list[int], rng: RandomSource) -> int:
    """Index i with probability weights[i] / sum(weights): every random choice of the
    planned-mode sampler goes through here (the exhaustive tests enumerate it)."""
    pick = rng.randrange(sum(weights))
    for i, w in enumerate(weights):
        if pick < w:
            return i
        pick -= w
    raise AssertionError("unreachable")


def _uniform_index(m: int, rng: RandomSource) -> int:
    """A uniform index below ``m`` (the exhaustive tests enumerate this too)."""
    return rng.randrange(m)


def _shuffled(n: int, rng: RandomSource) -> list[int]:
    perm = list(range(n))
    for i in range(n - 1, 0, -1):
        j = _uniform_index(i + 1, rng)
        perm[i], perm[j] = perm[j], perm[i]
    return perm


def sample_arrangement(n: int, max_runs: int, rng: RandomSource) -> list[int]:
    """A uniformly random permutation of ``range(n)`` with at most ``max_runs`` ascending runs.

    With ``max_runs >= n`` every permutation qualifies (a Fisher–Yates shuffle).
    Otherwise: pick the runs count r with weight A(n, r), then a uniform
    permutation with r − 1 descents by inserting 0, 1, ..., n − 1 in turn,
    where the descents count each insertion must keep or add comes from a
    backward walk weighted by Eulerian numbers.
    """
    if max_runs >= n:
        return _shuffled(n, rng)
    from shuffler.core.mixing import eulerian_row

    row = eulerian_row(n)
    runs = 1 + _weighted_index(list(row[1:max_runs + 1]), rng)
    descents = [0] * (n + 1)  # descents[m]: descents among the first m values inserted
    descents[n] = runs - 1
    for m in range(n, 1, -1):
        d = descents[m]
        keep = (d + 1) * eulerian_row(m - 1)[d + 1] if d <= m - 2 else 0
        grow = (m - d) * eulerian_row(m - 1)[d] if d >= 1 else 0
        descents[m - 1] = d - _weighted_index([keep, grow], rng)
    perm = [0]
    for m in range(2, n + 1):
        # inserting the largest value keeps the descents count in a descent or at the end,
        # and adds one in an ascent or at the front
        keep_slots = [i for i in range(1, m - 1) if perm[i - 1] > perm[i]] + [m - 1]
        grow_slots = [0] + [i for i in range(1, m - 1) if perm[i - 1] < perm[i]]
        slots = keep_slots if descents[m] == descents[m - 1] else grow_slots
        perm.insert(slots[_uniform_index(len(slots), rng)], m - 1)
    return perm


def run_codes(perm: list[int]) -> list[int]:
    """For each position of ``perm``, the index of the ascending run it lies in."""
    codes, run = [], 0
    for i, value in enumerate(perm):
        if i and value < perm[i - 1]:
            run += 1
        codes.append(run)
    return codes


def code_mask(k: int, feed: Feed, stackings: tuple[Pile, ...]) -> tuple[int, bool]:
    """How the mechanism turns codes into an order.

    With pass j dealing card c to pile ``bit j of code[c]``, k passes leave the
    pack sorted by ``code XOR mask``, ties in starting order, or in reverse
    starting order when the flag is true. Top feed reverses each pile, so every
    later pass flips the sense of the earlier bits; putting the right pile on top
    flips that pass's bit.
    """
    mask = 0
    reverses = feed is Feed.TOP
    for j in range(k):
        flip = stackings[j] is Pile.RIGHT
        flip ^= reverses and (k - 1 - j) % 2 == 1
        mask |= int(flip) << j
    return mask, reverses and k % 2 == 1


class PlannedPlanner(_Departures):
    """Planned passes: the pack ends uniform over every order k passes can reach.

    For the hand's k passes it draws the final order at once (from ``secrets``),
    gives each card the k-bit code of its run and deals pass j by bit j, handing
    the labels to cards where the tracker says they are. With 2^k >= n every
    card gets its own code: the n codes are 0..n−1 XOR a constant chosen so that on
    every pass the pile the light shows is the taller one (or the piles are equal), so
    a dealer who puts the taller pile on top follows the light; the result is exactly
    uniform for every stacking chosen without looking at the cards, so long as the
    sensors saw it (pile sizes are then fixed by the plan's public part). With fewer
    passes the codes assume a stacking for every pass: a stacking other than the one
    assumed re-plans the remaining passes from the known order, assuming from then on
    the habit the dealer showed (the pile the light asks for, or the other one), so a
    dealer who always does the other thing costs one pass, not the hand. A lost track
    (count mismatch, unseen stacking) re-plans the remaining passes from where the
    cards now lie, whatever that is.

    The distance after a re-plan is that of the passes planned since (an upper
    bound: what came before is an independent permutation, which cannot move the
    pack further from uniform), when that re-plan was not the dealer's doing. When
    the planner is told of a departure from the light, the hand carries the bound of
    last resort (:func:`~shuffler.core.mixing.tv_any`; see :class:`_Departures`).
    """

    mode = Mode.PLANNED

    def __init__(self, passes: int, rng: RandomSource | None = None,
                 on_top: Pile = Pile.LEFT) -> None:
        super().__init__()
        self.passes = passes
        self.rng = rng or system_random()
        self.on_top = on_top
        self.contrary = False  # the dealer puts the other pile on top than the light asks
        self._codes: list[int] | None = None  # code by card id; never logged or stored
        self._first = 0  # the pass the codes start at
        self._span = passes  # how many passes the codes cover
        self._distinct = False
        self._start: int | None = None  # the first pass this planner dealt (0 unless resumed)
        self._bound_from: int | None = None  # passes the guaranteed distance is computed from
        self._unknown = False
        self._from_unknown = False  # the hand began from an order the controller did not know
        self._dealer_replan = False  # the current codes were drawn because of the dealer

    def expected_stacking(self) -> Pile:
        """The pile the dealer is expected to put on top (the light shows ``on_top``)."""
        return self.on_top.other if self.contrary else self.on_top

    def _draw(self, index: int, tracker: PackTracker) -> None:
        order = tracker.order if tracker.known else tracker.rebase()
        assert order is not None
        n, k = len(order), self.passes - index
        expected = self.expected_stacking()
        mask, reverse_ties = code_mask(k, tracker.feed, (expected,) * k)
        base = order[::-1] if reverse_ties else order
        perm = sample_arrangement(n, 2**k, self.rng)
        self._distinct = 2**k >= n
        if self._distinct:
            # pass j's right pile holds the codes whose bit j differs from the mask's; XOR
            # by t puts the larger half on the pile the light shows (ties stay ties)
            up = int(expected is Pile.RIGHT)
            t = sum((((mask >> j) & 1) ^ up) << j for j in range(k))
            codes = sorted(x ^ t for x in range(n))
        else:
            codes = run_codes(perm)
        by_card = [0] * n
        for p, code in zip(perm, codes, strict=True):
            by_card[base[p]] = code ^ mask
        self._codes = by_card
        self._first, self._span = index, k

    def plan(self, index: int, cards: int, tracker: PackTracker) -> PassPlan:
        if self._start is None:
            self._start = self._bound_from = index
            self._from_unknown = not (tracker.known and tracker.from_start)
        if self._codes is None or not tracker.known or index >= self._first + self._span:
            self._draw(index, tracker)
        assert self._codes is not None and tracker.order is not None
        bit = index - self._first
        codes = self._codes
        fed = feed_order(tracker.order, tracker.feed)
        return PassPlan(tuple([(codes[c] >> bit) & 1 for c in fed]), self.on_top)

    def observe(self, index: int, plan: PassPlan, counted: int, stacking: Pile | None) -> None:
        last = index == self.passes - 1
        expected = self.expected_stacking()
        self.note(index, plan, stacking)
        if stacking is not None:
            self.contrary = stacking is not plan.on_top  # the habit the dealer shows
        if counted != plan.cards:
            self._codes = None
            if last:
                self._unknown = True
            self._bound_from = index + 1
            self._dealer_replan = False
        elif not last and (stacking is None or (stacking is not expected
                                                 and not self._distinct)):
            self._codes = None
            self._bound_from = index + 1
            self._dealer_replan = True
        # on the last pass a departure cannot be re-planned: with shared codes it changes
        # the law (5 cards, 2 passes, the other pile on top at the end: 0.467 from random)

    @property
    def exact(self) -> bool:
        return (not self._unknown and self._bound_from == 0 and not self._from_unknown
                and not self.departures)

    def distance(self, cards: int, passes_done: int) -> Fraction | None:
        """TVmin for the passes planned from the last point the controller knew the pack,
        or the bound for a dealer who chose by the cards (see the class notes);
        None while the passes planned together are not all done."""
        if self._unknown or self._bound_from is None:
            return None
        if self._codes is not None and passes_done < self._first + self._span:
            return None  # half a plan: its passes alone are not uniform over anything
        from shuffler.core.mixing import tv_any, tv_planned

        if self._dealer_replan or self.departures:
            return tv_any(cards)
        return tv_planned(cards, max(0, passes_done - self._bound_from))


def make_planner(mode: Mode, passes: int, rng: RandomSource | None = None) -> Planner:
    """The planner for a hand of ``passes`` passes in ``mode``."""
    return CoinPlanner(rng) if mode is Mode.COIN else PlannedPlanner(passes, rng)
