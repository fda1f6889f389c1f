"""Text for people, from the same dicts ``--json`` prints."""

from __future__ import annotations

from typing import Any

import click

from shuffler.core.words import passes, plural


def table_distance(distance: float) -> str:
    """A distance for a fixed-width column: four decimals, small ones in e-notation."""
    if distance == 0:
        return "0"
    if distance < 1 and f"{distance:.4f}" == "1.0000":
        return ">0.9999"
    return f"{distance:.4f}" if distance >= 1e-3 else f"{distance:.1e}"


def distance_text(distance, exact: bool = True) -> str:
    """``distance`` is None when nothing can be said; ``exact`` False when it is only an
    upper bound (after a double feed, a lost track or a resumed hand)."""
    if distance is None:
        return "distance from random unknown"
    if distance == 0:  # a bound of 0 is exact too
        return "exactly random"
    number = f"{float(distance):.4g}"  # never "1" below 1: 0.99996 is ">0.9999"
    if float(distance) < 1 and float(number) >= 1:
        number = ">0.9999"
    return f"distance from random {'' if exact else 'at most '}{number}"


def pass_line(p: dict[str, Any], of: int | None = None) -> str:
    head = f"pass {p['number']}/{of}" if of else "pass"
    line = (f"{head}: {p['counted']}/{p['expected']} cards counted, "
            f"piles {p['piles'][0]} + {p['piles'][1]}, {p['seconds']:.1f} s")
    if p.get("retries"):  # a card that stuck, backed out and fed again: said, not hidden
        line += f", {plural(p['retries'], 'retry', 'retries')} to free a stuck card"
    if p.get("min_volts") is not None:
        line += f", battery {p['min_volts']:.2f} V under load"
    return line


def of_passes(done: int, planned: int) -> str:
    """"3 of 5 passes", "1 of 1 pass": the count of the passes planned."""
    return f"{done} of {passes(planned)}"


def ended_by(fault: dict[str, Any] | None) -> str:
    """How a hand that did not finish ended: "stopped on request" (``shuffler stop``,
    the page's Stop, a signal), "stopped (jam)", "stopped (no touch)"."""
    if fault is None:
        return "stopped (no touch)"
    if fault["kind"] == "stopped":
        return "stopped on request"
    return f"stopped ({fault['kind'].replace('_', ' ')})"


def hand_summary(h: dict[str, Any]) -> str:
    done = h["passes_done"]
    mode = "coin flips" if h["mode"] == "coin" else "planned"
    if h["completed"]:
        distance = distance_text(h["distance"], h.get("distance_exact", True))
        deck = f"; deck {h['deck']} is ready" if h.get("deck") else ""
        note = f" ({h['distance_note']})" if h.get("distance_note") else ""
        return (f"hand {h['number']}: dealt by {h['dealer']}; {of_passes(done, h['passes'])} "
                f"done ({mode}, {distance}); "
                f"{h['next_dealer']} deals next{deck}{note}")

    from shuffler.device.contract import FaultKind

    fault = h.get("fault")
    step = ("free the machine, run `shuffler clear`, then `shuffler hand` to finish it"
            if fault and FaultKind(fault["kind"]).latches
            else "run `shuffler hand` to finish it")
    return (f"hand {h['number']}: stopped after {of_passes(done, h['passes'])}; "
            f"{h['dealer']} still deals; {step}")


def status_text(s: dict[str, Any], color: bool = False) -> str:
    dev, b, c = s["device"], s["battery"], s["counters"]
    health = "ok" if s["health"]["ok"] else "FAULT"
    if color:
        health = click.style(health, fg="green" if s["health"]["ok"] else "red", bold=True)
    lines = [f"device: {dev['name']} ({dev['kind']}), feed from the {dev['feed']}",
             f"health: {health}",
             *([f"microcontroller: last reset by {s['health']['reset_cause'].replace('_', ' ')}"]
               if s["health"].get("reset_cause") else []),
             f"fault: {s['fault']['message'] if s['fault'] else 'none'}",
             battery_line(b),
             f"counters: {plural(c['hands'], 'hand')}, {passes(c['passes'])}, "
             f"{plural(c['cards'], 'card')}, {plural(c['jams'], 'jam')}, "
             f"{c['interrupted']} interrupted",
             f"dealer: {s['dealer']}"]
    if last := s.get("last_hand"):
        state = "done" if last["completed"] else ended_by(last["fault"])
        # the hand's own words: "at most" where it said it, its note, nothing else added
        exact = last.get("distance_exact")
        if exact is None:  # an older state file: a hand whose track was lost was a bound
            exact = last["tracking"]
        note = f" ({last['distance_note']})" if last.get("distance_note") else ""
        lines.append(f"last hand: {last['number']}, {state}: "
                     f"{of_passes(last['passes_done'], last['passes'])}, "
                     f"{distance_text(last['distance'], exact)}"
                     f"{note}")
    h = s.get("hand_in_progress")
    if h:
        lines.append(f"hand {h['number']} in progress: "
                     f"{of_passes(h['passes_done'], h['passes'])} done")
    return "\n".join(lines)


def no_figures(b: dict[str, Any]) -> str | None:
    """No figures to give: no monitor, or its own fault (``battery.monitor``)."""
    if b.get("measured") is False:
        return "battery: not measured (no battery monitor: [gpio] adc_channel = false)"
    m = b.get("monitor")
    if b.get("state") != "monitor_fault" or not m:
        return None
    what = {"no_reading": "no reading", "full_scale": "stuck at full scale"}
    return f"battery: monitor fault ({what.get(m['problem'], m['problem'])}): {m['message']}"


def unsteady_text(b: dict[str, Any]) -> str:
    m = b.get("monitor")
    return f"\nbattery monitor unsteady: {m['message']}" if m else ""


def battery_line(b: dict[str, Any]) -> str:
    if (fault := no_figures(b)) is not None:
        return fault
    left = (f"about {passes(b['passes_left'])} left" if b["passes_left"]
            else "not one pass left")
    return (f"battery: {b['volts']:.2f} V, {b['percent']:.0f}%, {b['state']}, {left}"
            + unsteady_text(b))


def battery_text(b: dict[str, Any]) -> str:
    if (fault := no_figures(b)) is not None:
        return fault
    # the passes and hands left, in words: "about 2 passes of 24 cards left (1 to 2), no
    # hand of 5 passes", never "about 0 passes (0 to 0)" or "1 hands"
    low, high = b["passes_left_range"]
    cards = plural(b["cards"], "card")
    spread = f" ({low} to {high})" if low != high else ""
    left = (f"not one pass of {cards} left" if high == 0
            else f"about {passes(b['passes_left'])} of {cards} left{spread}")
    hands = plural(b["hands_left"], "hand", none="no hand")
    text = (f"battery: {b['volts']:.2f} V {'under load' if b['under_load'] else 'at rest'}, "
            f"{b['percent']:.0f}% ({b['chemistry']}), {b['state']}\n{left}, {hands} of "
            f"{passes(b['passes_per_hand'])}")
    if b.get("swapped"):
        text += ("\n(another block than the last pass's: the estimate starts again from "
                 "its curve)")
    elif not b["learned"]:
        text += "\n(from the battery's curve alone: no passes recorded on it yet)"
    return text + unsteady_text(b)

