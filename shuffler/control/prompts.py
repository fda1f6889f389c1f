"""The dealer's words that the terminal and the page both say: ``shuffler hand`` prints
them (shuffler.control.session) and the page's panel (shuffler.faces.panel) shows them."""

from __future__ import annotations

from shuffler.core.mechanics import Pile


def stack_prompt(on_top: Pile | None, last: bool = False) -> str:
    """Between passes; after the ``last`` pass the pack is ready to deal."""
    pile = "one pile on the other" if on_top is None else f"the {on_top.name} pile on top"
    if last:
        return f"Put {pile}: the pack is shuffled, deal"
    return f"Put {pile}, then touch"


def wrong_pile_prompt(on_top: Pile | None) -> str:
    """The other pile was lifted first (``Status.warn``): the page and the CLI say so."""
    pile = "the pile the light shows" if on_top is None else f"the {on_top.name} pile"
    return f"The other pile first: put it back and lift {pile} first"
