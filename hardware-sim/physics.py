"""The physics of the mechanism: the tray, the feed roller, the beam, the piles.

Every simulated backend moves cards through one :class:`Mechanism`, asking it
for the next :class:`Transit` (what the beam sees as the roller pushes the next
card) and landing the card on whichever pile the diverter points to.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from shuffler.core.mechanics import Feed, Pile, stack

from .battery import SimBattery
from .dealer import PilesSeen
from .faults import FaultPlan

T = TypeVar("T")


class TransitKind(enum.Enum):
    CARD = "card"  # one card (or a double) crossed the beam
    JAM = "jam"  # the card entered the throat and stuck: the beam stays blocked
    MISFEED = "misfeed"  # the roller slipped: no card reaches the beam
    STALL = "stall"  # the motor does not turn: the battery is too weak
    EMPTY = "empty"  # the tray is empty


@dataclass(frozen=True)
class Transit:
    kind: TransitKind
    gap: float = 0.0  # seconds from the previous card (or motor start) to the leading edge
    blocked: float = 0.0  # seconds the beam stays blocked by this card
    cards: int = 0  # cards moving together: 2 for a double feed
    load_volts: float = 0.0  # battery under load while this card moved
    dropout: float = 0.0  # seconds the beam clears in the middle of the card (--sim-fault)

    @property
    def dropout_at(self) -> float:
        """Seconds from the leading edge to the drop-out's start (it is centred)."""
        return (self.blocked - self.dropout) / 2


@dataclass
class MechanismSpec:
    """Fixed properties of the machine."""

    feed: Feed = Feed.TOP
    card_rate: float = 5.0  # cards a second at full voltage (the Lotus deals about five)
    spinup: float = 0.2  # seconds from motor on to the first card
    duty: float = 0.4  # fraction of a card interval the beam is blocked
    full_speed_volts: float = 5.7  # under load; the driver holds the speed down to this
    stall_volts: float = 5.4  # under load; below it the motor stalls


@dataclass
class Mechanism(Generic[T]):
    """The state of the machine's cards and the rules that move them."""

    tray: list[T]
    spec: MechanismSpec = field(default_factory=MechanismSpec)
    battery: SimBattery = field(default_factory=SimBattery)
    faults: FaultPlan = field(default_factory=FaultPlan)
    piles: tuple[list[T], list[T]] = field(default_factory=lambda: ([], []))
    stuck: list[T] = field(default_factory=list)  # cards caught in the throat
    fed_this_pass: int = 0
    first_landed: Pile | None = None  # the pile the pass's first card fell on
    last_landed: Pile | None = None  # and its last (what a dealer may look at)
    _retries_at_card: int = 0

    # -- a pass --------------------------------------------------------------
    def start_pass(self) -> None:
        self.fed_this_pass = 0
        self.first_landed = self.last_landed = None
        self._retries_at_card = 0

    def speed(self, load_volts: float) -> float:
        """Fraction of full card rate at this voltage under load (0 = stalled)."""
        s = self.spec
        if load_volts < s.stall_volts:
            return 0.0
        return min(
            1.0, 0.3 + 0.7 * (load_volts - s.stall_volts) / (s.full_speed_volts - s.stall_volts)
        )

    def next_transit(self, first: bool = False) -> Transit:
        """Push the next card towards the beam and say what the beam sees."""
        if self.stuck:
            return Transit(TransitKind.JAM, load_volts=self.battery.volts(True))
        if not self.tray:
            return Transit(TransitKind.EMPTY)
        volts = self.battery.volts(under_load=True)
        speed = self.speed(volts)
        if speed == 0.0:
            return Transit(TransitKind.STALL, load_volts=volts)
        card_no = self.fed_this_pass + 1
        if self._fires(self.faults.misfeeds, card_no):
            return Transit(TransitKind.MISFEED, load_volts=volts)
        interval = 1.0 / (self.spec.card_rate * speed)
        gap = interval * (1 - self.spec.duty) + (self.spec.spinup if first else 0.0)
        self.battery.draw(gap)
        if self._fires(self.faults.jams, card_no):
            self.stuck.append(self._take())
            return Transit(TransitKind.JAM, gap=gap, load_volts=volts)
        double = card_no in self.faults.doubles and len(self.tray) >= 2
        if double:
            self.faults.doubles.discard(card_no)
        blocked, dropout = interval * self.spec.duty, self.faults.dropout_s or 0.0
        if dropout:  # the card keeps at least a tenth of its blocking either side of it
            blocked = max(blocked, dropout + blocked / 5)
        return Transit(
            TransitKind.CARD,
            gap=gap,
            blocked=blocked,
            cards=2 if double else 1,
            load_volts=volts,
            dropout=dropout,
        )

    def _fires(self, table: dict[int, int | None], card_no: int) -> bool:
        if card_no not in table:
            return False
        frees_after = table[card_no]
        if frees_after is not None and self._retries_at_card >= frees_after:
            del table[card_no]
            return False
        return True

    def _take(self) -> T:
        return self.tray.pop(0 if self.spec.feed is Feed.TOP else -1)

    def land(self, transit: Transit, pile: Pile) -> None:
        """The card(s) of ``transit`` leave the beam and drop on ``pile``."""
        self.battery.draw(transit.blocked)
        for _ in range(transit.cards):
            self.piles[pile].insert(0, self._take())
        if self.first_landed is None:
            self.first_landed = pile
        self.last_landed = pile
        self.fed_this_pass += 1
        self._retries_at_card = 0

    def retry(self, reverse_seconds: float = 0.3) -> None:
        """Run the roller backwards briefly, then feed again: a stuck card goes back
        into the tray, and a card that frees after this many retries will now feed."""
        self.battery.draw(reverse_seconds)
        self._retries_at_card += 1
        while self.stuck:
            card = self.stuck.pop()
            if self.spec.feed is Feed.TOP:
                self.tray.insert(0, card)
            else:
                self.tray.append(card)

    # -- the dealer's hands ----------------------------------------------------
    def restack(self, on_top: Pile) -> None:
        """The dealer puts ``on_top`` on the other pile and the pack back in the tray."""
        self.tray = [*stack(self.piles, on_top), *self.tray]
        self.piles = ([], [])

    def seen(self, last_pass: bool) -> PilesSeen:
        """What the dealer sees on the table now."""
        return PilesSeen((len(self.piles[0]), len(self.piles[1])), self.first_landed,
                         self.last_landed, last_pass)

    def free_throat(self) -> None:
        """The dealer pulls a card caught in the throat back into the tray: the beam
        is clear again (the jam that held it does not come back)."""
        self.faults.jams.pop(self.fed_this_pass + 1, None)
        self.tray = [*self.stuck, *self.tray]
        self.stuck = []

    def gather(self) -> None:
        """After a fault: the dealer frees the throat and puts every card back in the tray."""
        card_no = self.fed_this_pass + 1
        self.faults.jams.pop(card_no, None)
        self.faults.misfeeds.pop(card_no, None)
        self.tray = [*self.piles[0], *self.piles[1], *self.stuck, *self.tray]
        self.piles, self.stuck = ([], []), []

    @property
    def cards(self) -> int:
        return len(self.tray) + len(self.piles[0]) + len(self.piles[1]) + len(self.stuck)
