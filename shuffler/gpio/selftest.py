"""``shuffler selftest``: bring a freshly wired machine up, one part at a time.

The order is the first-power-on procedure's (docs/hardware.md): the 9 V rail at
the battery monitor first (an over-range reading at CH0 stops everything), then
the inputs, then the outputs that do not move (light, buzzer), and last the
parts that move (motor, flap), each only after the builder confirms that hands
are clear. Nobody at the bench (``--yes``) means nothing moves: those steps are
skipped and say why.

Each step asks the builder to do something (touch the sensor, cover the tray,
pass a card through the beam) and watches the pin that should answer, or
drives an output and asks the builder what happened. A step passes, fails with
what to check (the part, its header pin, the likely wiring fault), or is
skipped. Given a multimeter reading the first step calibrates the divider from
the mean of :data:`SAMPLES` readings.

Two sides are abstract so one run works on a real machine and on the rig:

- a :class:`Bench`: direct control of the parts (``GpioDevice.bench()``);
- a :class:`Builder`: the person (prompts on a terminal) or, on ``sim-gpio``,
  the rig, which does what is asked and answers from what its pins saw.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from shuffler.core.battery import monitor_problem
from shuffler.core.mechanics import Pile
from shuffler.device.clock import Clock
from shuffler.limits import DRIVER_VM_MAX_VOLTS, over_voltage
from shuffler.pinmap import divider_ratio, header_pin

#: the inputs a bench reports, by [pins] role: True while touched, covered or blocked
SENSORS = ("touch", "tray", "pile_left", "pile_right", "beam")
#: how far a calibrated divider may sit from the schematic's ratio (1% parts, meter, Vref)
CALIBRATION_SPREAD = 0.05
#: readings of CH0 averaged for the calibration, and how far apart they may lie (volts at
#: CH0: about 4 LSB of the MCP3008 at 3.3 V)
SAMPLES, SAMPLE_SPREAD = 16, 0.013
#: the parts that move: run only after the builder confirms, never unattended
MOVING = ("motor", "flap")
#: the motor step: at the duty cap ([gpio] motor_volts, as a pass runs), long enough to see
#: the roller turn and read AIN1 on a meter (about 2 V: the cap × 3.3 V)
MOTOR_SPEED, MOTOR_SECONDS = 1.0, 1.5
COLOURS = {"red": (1.0, 0.0, 0.0), "green": (0.0, 1.0, 0.0), "blue": (0.0, 0.0, 1.0)}


class Bench(Protocol):
    """The machine's parts, driven one at a time (never during a pass); ``clock`` is the
    machine's own (wall time on a Pi, the rig's virtual time on sim-gpio)."""

    clock: Clock

    def sensed(self) -> dict[str, bool]: ...
    def run_motor(self, speed: float, seconds: float) -> None: ...
    def throw(self, pile: Pile) -> None: ...
    def light(self, colour: tuple[float, float, float]) -> None: ...
    def beep(self, seconds: float) -> None: ...
    def adc_volts(self) -> float | None: ...  # volts at CH0, None without a monitor

    @property
    def pins(self) -> dict[str, int]: ...  # the configured [pins] in use: role -> BCM
    @property
    def can_reverse(self) -> bool: ...
    @property
    def has_light(self) -> bool: ...
    @property
    def has_buzzer(self) -> bool: ...
    @property
    def divider_ratio(self) -> float: ...


class Builder(Protocol):
    """Who does what a step asks: ``act`` before the step watches, ``ask`` after it acts.
    Actions and questions have stable ids (``cover:tray``, ``flap:left``) so the rig can
    play them; ``text`` is what a person reads. ``can_act`` is False when nobody is
    there (``--yes`` on a real machine): the steps that need hands are skipped.
    ``confirm`` is asked before a part moves; False skips it (``--yes`` always says no)."""

    can_act: bool

    def act(self, action: str, text: str) -> None: ...
    def confirm(self, question: str, text: str) -> bool: ...
    def ask(self, question: str, text: str, choices: dict[str, str]) -> str | None: ...
    def measure(self, question: str, text: str) -> float | None: ...


class Outcome(enum.Enum):
    PASS = "pass"
    FAIL = "fail"
    SKIP = "skip"


@dataclass(frozen=True)
class StepResult:
    step: str
    part: str
    outcome: Outcome
    detail: str
    check: str = ""  # what to check when it failed

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "part": self.part, "outcome": self.outcome.value,
                "detail": self.detail, "check": self.check}


@dataclass
class Report:
    steps: list[StepResult] = field(default_factory=list)
    divider_ratio: float | None = None  # calibrated, when a multimeter reading was given

    @property
    def passed(self) -> bool:
        return not any(s.outcome is Outcome.FAIL for s in self.steps)

    def failed(self) -> list[StepResult]:
        return [s for s in self.steps if s.outcome is Outcome.FAIL]

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "steps": [s.to_dict() for s in self.steps],
                "divider_ratio": (None if self.divider_ratio is None
                                  else round(self.divider_ratio, 4))}


def where(role: str, pins: dict[str, int]) -> str:
    """A signal's config key and header pin as configured: ``[pins] tray (GPIO25, pin 22)``."""
    bcm = pins.get(role)
    if bcm is None:
        return f"[pins] {role} (not set)"
    return f"[pins] {role} (GPIO{bcm}, pin {header_pin(bcm)})"


def pin_of(role: str, pins: dict[str, int]) -> str:
    """``pin 11``: the header pin ``role`` is configured on."""
    bcm = pins.get(role)
    return "its header pin (not set)" if bcm is None else f"pin {header_pin(bcm)}"


#: what each input is, for a person
PART = {"touch": "touch sensor", "tray": "tray sensor", "pile_left": "left pile sensor",
        "pile_right": "right pile sensor", "beam": "card beam"}


def check(role: str, pins: dict[str, int]) -> str:
    """What to check of an input that never answered, with its configured header pin."""
    pin = pin_of(role, pins)
    return {
        "touch": f"U4, the TTP223: VCC on 3V3 (pin 1), its GND, and I/O to {pin}",
        "tray": f"U6, the tray's TCRT5000: VCC on 3V3, GND, DO to {pin}; turn its trimmer "
                "until its LED lights only with a card over it",
        "pile_left": f"U7, the left pile's TCRT5000: VCC on 3V3, GND, DO to {pin}; its "
                     "trimmer",
        "pile_right": f"U8, the right pile's TCRT5000: VCC on 3V3, GND, DO to {pin}; its "
                      "trimmer",
        "beam": "the IR emitter D2 (R6 330 Ω from 5V_MECH: a phone camera sees it glow), its "
                "alignment with the receiver U3, its 3V3 and GND, R7 10 kΩ pull-up, "
                f"OUT to {pin}",
    }[role]


#: why a moving part was not run
UNATTENDED = ("not run: a part that moves runs only when the builder at the bench says "
              "hands are clear (never with --yes)")


class SelfTest:
    """One run of the steps, in order; ``skip`` names steps not to run."""

    STEPS = ("battery", "touch", "tray", "pile_left", "pile_right", "beam", "light",
             "buzzer", "motor", "flap")

    def __init__(self, bench: Bench, builder: Builder, *, clock: Clock | None = None,
                 timeout: float = 20.0, skip: tuple[str, ...] = ()) -> None:
        self.bench, self.builder = bench, builder
        self.clock = clock or bench.clock  # the machine's time: waits on the rig take none
        self.timeout = timeout
        self.skip = set(skip)
        self.report = Report()
        self.over_range = self.no_power = False  # what the rails step found
        self.over_voltage = False  # the 9 V side above the driver's limit

    def where(self, role: str) -> str:
        """``role``'s config key and header pin, as this machine's config has it."""
        return where(role, self.bench.pins)

    def check(self, role: str) -> str:
        """What to check of input ``role``, at its configured header pin."""
        return check(role, self.bench.pins)

    def run(self, on_step: Callable[[StepResult], None] | None = None) -> Report:
        steps: dict[str, Callable[[], StepResult]] = {
            "touch": self.touch, "tray": lambda: self.presence("tray"),
            "pile_left": lambda: self.presence("pile_left"),
            "pile_right": lambda: self.presence("pile_right"), "beam": self.beam,
            "motor": self.motor, "flap": self.flap, "light": self.light,
            "buzzer": self.buzzer, "battery": self.battery}
        hands = ("touch", "tray", "pile_left", "pile_right", "beam")
        halt: str | None = None  # why the steps after the rails do not run
        for name in self.STEPS:
            if name in self.skip:
                result = StepResult(name, name, Outcome.SKIP, "skipped (--skip)")
            elif halt is not None:
                result = StepResult(name, name, Outcome.SKIP, halt)
            elif name in hands and not self.builder.can_act:
                result = StepResult(name, PART[name], Outcome.SKIP,
                                    "needs the builder's hands: run without --yes")
            elif name in MOVING and self.no_power:
                result = StepResult(name, name, Outcome.SKIP, "not run: no 9 V at the "
                                    "mechanism (the rails step failed)")
            else:
                result = steps[name]()
            if name == "battery" and result.outcome is Outcome.FAIL and self.over_range:
                halt = "not run: CH0 read over range; disconnect the block and fix it first"
            elif name == "battery" and self.over_voltage:
                halt = (f"not run: the 9 V side is above the DRV8833's {DRIVER_VM_MAX_VOLTS:g} "
                        "V limit; disconnect it and fit a 9 V block")
            self.report.steps.append(result)
            if on_step:
                on_step(result)
        return self.report

    # -- inputs ------------------------------------------------------------------------
    def _watch(self, role: str, want: bool, base: dict[str, bool]) -> tuple[bool, str | None]:
        """Wait for ``role`` to read ``want``. Returns (seen, another sensor that moved from
        ``base`` instead)."""
        deadline = self.clock.now() + self.timeout
        while self.clock.now() < deadline:
            now = self.bench.sensed()
            if now[role] == want:
                return True, None
            moved = [r for r in SENSORS if r != role and now[r] != base[r]]
            if moved:
                return False, moved[0]
            self.clock.sleep(0.01)
        return False, None

    def _expect(self, role: str, action: str, text: str, want: bool) -> StepResult | None:
        """Ask for ``action`` and watch for it; a failure, or None when it was seen."""
        base = self.bench.sensed()
        self.builder.act(action, text)
        seen, other = self._watch(role, want, base)
        if seen:
            return None
        part = PART[role]
        if other is not None:
            return StepResult(role, part, Outcome.FAIL,
                              f"{action}: {self.where(other)} changed instead of "
                              f"{self.where(role)}",
                              f"the {PART[other]} and the {part} wires are swapped (or the "
                              f"sensors are mounted in each other's place): swap them at the "
                              f"header or swap {role} and {other} in [pins]")
        state = "active" if want else "inactive"
        return StepResult(role, part, Outcome.FAIL,
                          f"{action}: {self.where(role)} never went {state} in "
                          f"{self.timeout:g} s", self.check(role))

    def touch(self) -> StepResult:
        if self.bench.sensed()["touch"]:
            return StepResult("touch", PART["touch"], Outcome.FAIL,
                              f"{self.where('touch')} reads touched with no hand on it",
                              self.check("touch") + "; a module powered from 5 V, or one "
                              "that reads low while touched: then set [gpio] "
                              "touch_active_high = false")
        fail = (self._expect("touch", "touch", "Touch the sensor on the lid, then let go.",
                             True)
                or self._expect("touch", "release", "Let go of the sensor.", False))
        return fail or StepResult("touch", PART["touch"], Outcome.PASS, "touched and released")

    def _clear_all(self) -> None:
        """Ask for the tray and both piles empty; wait (up to the timeout) until they read so.
        A sensor that still reads covered is found out by its own step."""
        self.builder.act("clear", "Take every card off the tray and both piles.")
        deadline = self.clock.now() + self.timeout
        while self.clock.now() < deadline:
            now = self.bench.sensed()
            if not (now["tray"] or now["pile_left"] or now["pile_right"]):
                return
            self.clock.sleep(0.01)

    def presence(self, role: str) -> StepResult:
        if role == "tray":
            self._clear_all()
        name = {"tray": "the tray", "pile_left": "the left pile's place",
                "pile_right": "the right pile's place"}[role]
        if self.bench.sensed()[role]:
            fail = self._expect(role, f"uncover:{role}", f"Take every card off {name}.",
                                False)
            if fail:
                return fail
        fail = (self._expect(role, f"cover:{role}", f"Put a few cards on {name}.", True)
                or self._expect(role, f"uncover:{role}", f"Take them off {name} again.",
                                False))
        return fail or StepResult(role, PART[role], Outcome.PASS, "covered and uncovered")

    def beam(self) -> StepResult:
        if self.bench.sensed()["beam"]:
            return StepResult("beam", PART["beam"], Outcome.FAIL,
                              f"{self.where('beam')} reads blocked with no card in the gate",
                              self.check("beam") + "; a receiver that reads high while blocked "
                              "needs [gpio] beam_active_high = true")
        fail = (self._expect("beam", "card:beam", "Push one card slowly through the gate, "
                             "across the beam.", True)
                or self._expect("beam", "card:beam-out", "Pull it out of the beam.", False))
        return fail or StepResult("beam", PART["beam"], Outcome.PASS, "blocked and cleared")

    # -- outputs -------------------------------------------------------------------------
    def motor(self) -> StepResult:
        part = "feed motor (DRV8833)" if self.bench.can_reverse else "feed motor (MOSFET)"
        pins = self.where("motor") + (f" and {self.where('motor_backward')}"
                                      if self.bench.can_reverse else "")
        dead = (f"9 V at U1's VIN (TP1: SW1 on, F1 not tripped, C1 polarity), SLP (nSLEEP) "
                f"pulled up to 3V3 by R3, {pins}, the motor's leads at AOUT1/AOUT2 (J2)")
        runs = [("forward", MOTOR_SPEED)] + ([("backward", -MOTOR_SPEED)]
                                             if self.bench.can_reverse else [])
        choices = {"f": "forward (feeding a card)", "b": "backward", "n": "not at all"}
        if not self.builder.confirm("move:motor", "The roller turns forward then backward "
                                    f"for {MOTOR_SECONDS:g} s each, at full speed. Hands "
                                    "clear of the roller?"):
            return StepResult("motor", part, Outcome.SKIP, UNATTENDED)
        for way, speed in runs:
            self.builder.act(f"watch:motor:{way}", f"Watch the roller: it turns {way} for "
                             f"{MOTOR_SECONDS:g} s.")
            try:
                self.bench.run_motor(speed, MOTOR_SECONDS)
            finally:
                self.bench.run_motor(0.0, 0.0)
            answer = self.builder.ask(f"motor:{way}", "Which way did the roller turn?",
                                      choices)
            if answer is None:
                return StepResult("motor", part, Outcome.SKIP, "no answer")
            if answer == "n":
                which = f"{self.where('motor_backward')} (AIN2)" if way == "backward" else dead
                return StepResult("motor", part, Outcome.FAIL,
                                  f"the roller did not turn {way}", which)
            if answer != way[0]:
                return StepResult("motor", part, Outcome.FAIL, f"driven {way}, the roller "
                                  f"turned {choices[answer].split()[0]}",
                                  "the motor's two leads are reversed: swap them at "
                                  "AOUT1/AOUT2 (or swap motor and motor_backward in [pins])")
            self.clock.sleep(0.2)
        return StepResult("motor", part, Outcome.PASS, " then ".join(w for w, _ in runs))

    def flap(self) -> StepResult:
        part = "diverter (servo)"
        if not self.builder.confirm("move:flap", "The flap swings left and right. Fingers "
                                    "clear of the flap?"):
            return StepResult("flap", part, Outcome.SKIP, UNATTENDED)
        self.bench.throw(Pile.RIGHT)  # from the other side, so each throw is a real move
        self.clock.sleep(0.3)
        for pile in (Pile.LEFT, Pile.RIGHT):
            side = pile.name.lower()
            self.builder.act(f"watch:flap:{side}", f"Watch the flap: it swings to send cards "
                             f"to the {side} pile.")
            self.bench.throw(pile)
            self.clock.sleep(0.3)
            answer = self.builder.ask(f"flap:{side}", "Which pile does the flap send cards to "
                                      "now?", {"l": "left", "r": "right", "n": "it did not "
                                                                             "move"})
            if answer is None:
                return StepResult("flap", part, Outcome.SKIP, "no answer")
            if answer == "n":
                return StepResult("flap", part, Outcome.FAIL, f"the flap did not move when "
                                  f"sent {side}", f"the servo's V+ on 5V_MECH (the buck's "
                                  f"output reads 5 V), its GND, the signal on "
                                  f"{self.where('diverter')}")
            if answer != side[0]:
                return StepResult("flap", part, Outcome.FAIL, f"sent {side}, the flap points "
                                  f"{'right' if side == 'left' else 'left'}",
                                  "the horn is on the wrong way round: refit it so the flap "
                                  "sends cards left at the servo's negative angle")
        return StepResult("flap", part, Outcome.PASS, "left and right")

    def light(self) -> StepResult:
        part = "status light (RGB LED)"
        if not self.bench.has_light:
            return StepResult("light", part, Outcome.SKIP, "no light fitted ([pins] led_*)")
        choices = {"r": "red", "g": "green", "b": "blue", "o": "off", "x": "another colour"}
        try:
            for name, rgb in COLOURS.items():
                self.builder.act(f"watch:light:{name}", "Look at the status light.")
                self.bench.light(rgb)
                answer = self.builder.ask(f"light:{name}", "What colour is it?", choices)
                if answer is None:
                    return StepResult("light", part, Outcome.SKIP, "no answer")
                if answer != name[0]:
                    role = f"led_{name}"
                    seen = choices.get(answer, answer)
                    check = (f"the {name} leg: its resistor and {self.where(role)}; the LED "
                             "must be common cathode, its cathode to GND")
                    if answer in "rgb":
                        check = (f"the {name} and {seen} legs are swapped: swap them at the "
                                 f"header or swap led_{name} and led_{seen} in [pins]")
                    return StepResult("light", part, Outcome.FAIL,
                                      f"{name} was shown, the builder saw {seen}", check)
        finally:
            self.bench.light((0.0, 0.0, 0.0))
        return StepResult("light", part, Outcome.PASS, "red, green and blue")

    def buzzer(self) -> StepResult:
        part = "buzzer"
        if not self.bench.has_buzzer:
            return StepResult("buzzer", part, Outcome.SKIP, "no buzzer fitted ([pins] buzzer)")
        self.builder.act("listen:buzzer", "Listen: the buzzer sounds once.")
        self.bench.beep(0.3)
        answer = self.builder.ask("buzzer", "Did it beep?", {"y": "yes", "n": "no"})
        if answer is None:
            return StepResult("buzzer", part, Outcome.SKIP, "no answer")
        if answer == "y":
            return StepResult("buzzer", part, Outcome.PASS, "beeped")
        return StepResult("buzzer", part, Outcome.FAIL, "no sound",
                          f"Q2 (2N3904) the right way round, R8 1 kΩ to {self.where('buzzer')}, "
                          "the buzzer's + on 5V_PI (pin 2) and − to Q2's collector; an "
                          "active buzzer (a passive one only clicks)")

    # -- the battery -------------------------------------------------------------------
    def battery(self) -> StepResult:
        part = "9 V rail at the battery monitor (MCP3008 + divider)"
        first = self.bench.adc_volts()
        if first is None:
            return StepResult("battery", part, Outcome.SKIP,
                              "no battery monitor ([gpio] adc_channel = false)")
        readings = [first]
        for _ in range(SAMPLES - 1):
            self.clock.sleep(0.005)
            readings.append(self.bench.adc_volts() or 0.0)
        tap = sum(readings) / len(readings)
        ratio = self.bench.divider_ratio
        self.no_power = monitor_problem(tap) == "no_reading"
        self.over_range = monitor_problem(max(readings)) == "full_scale"
        if self.no_power:
            return StepResult("battery", part, Outcome.FAIL, f"CH0 reads {tap:.2f} V",
                              "SW1 on and a charged block in; TP1 reads the block (else F1 "
                              "tripped or Q3 fitted the wrong way); R1 from the 9 V rail to "
                              "the tap (TP3), R2 to GND, R10 from the tap to MCP3008 pin 1; "
                              "the MCP3008's VDD and VREF on 3V3 and the SPI pins 19, 21, 23,"
                              " 24, SPI enabled. A build without a battery monitor sets "
                              "[gpio] adc_channel = false")
        if self.over_range:
            return StepResult("battery", part, Outcome.FAIL, f"CH0 reads full scale "
                              f"({tap:.2f} V)", "disconnect the battery now: CH0 sees more "
                              "than 3.3 V. R1 (100 kΩ) and R2 (33 kΩ) must divide the 9 V; "
                              "is R1 shorted or R2 open?")
        if max(readings) - min(readings) > SAMPLE_SPREAD:
            return StepResult("battery", part, Outcome.FAIL, f"CH0 wanders from "
                              f"{min(readings):.3f} to {max(readings):.3f} V over {SAMPLES} "
                              "readings", "C3 (100 nF across R2) and C5 (100 nF at the "
                              "MCP3008's VDD) fitted; a loose tap wire or ground")
        volts = tap * ratio
        over = over_voltage(volts)
        if over is not None:
            self.over_voltage = True
            return StepResult("battery", part, Outcome.FAIL, over.removesuffix(
                " Use a 9 V block (6 or 7 cells)."), "disconnect it now: only a 9 V block "
                "(6 or 7 cells) on the 9 V side; the rest of the self-test does not run")
        measured = self.builder.measure(
            "multimeter", f"The monitor reads {volts:.2f} V. Measure the 9 V block at its "
            "clip with a multimeter (volts; blank to skip)")
        if measured is None:
            return StepResult("battery", part, Outcome.PASS, f"{volts:.2f} V (not calibrated)")
        if measured > DRIVER_VM_MAX_VOLTS:
            self.over_voltage = True
            return StepResult("battery", part, Outcome.FAIL, f"the multimeter reads "
                              f"{measured:.2f} V at the clip: above the DRV8833's "
                              f"{DRIVER_VM_MAX_VOLTS:g} V limit (its VM)", "disconnect it "
                              "now: only a 9 V block (6 or 7 cells) on the 9 V side; the "
                              "rest of the self-test does not run")
        calibrated = measured / tap
        nominal = divider_ratio()
        if abs(calibrated / nominal - 1) > CALIBRATION_SPREAD:
            return StepResult("battery", part, Outcome.FAIL,
                              f"the divider's ratio is {calibrated:.2f}, not {nominal:.2f}",
                              "R1 must be 100 kΩ and R2 33 kΩ (±1%): read their colour "
                              "bands, and check the multimeter reading")
        self.report.divider_ratio = calibrated
        return StepResult("battery", part, Outcome.PASS, f"{measured:.2f} V; divider ratio "
                          f"calibrated to {calibrated:.4f}")


def set_divider_ratio(text: str, ratio: float) -> str:
    """The config ``text`` with ``[gpio] divider_ratio`` set to ``ratio``; every other line
    as it was."""
    lines = text.splitlines()
    value = f"divider_ratio = {ratio:.4f}"
    table = None
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("[") and not stripped.startswith("[["):
            table = stripped.split("]")[0].strip("[ ")
            continue
        if table == "gpio" and stripped.split("=")[0].strip() == "divider_ratio":
            comment = line[line.index("#"):] if "#" in line else ""
            lines[i] = value + (f"  {comment}" if comment else "")
            return "\n".join(lines) + "\n"
    for i, line in enumerate(lines):
        if line.strip().split("#")[0].strip() == "[gpio]":
            lines.insert(i + 1, value)
            return "\n".join(lines) + "\n"
    body = "\n".join(lines)
    return (body + "\n\n" if body.strip() else "") + f"[gpio]\n{value}\n"


class GpioBench:
    """The :class:`Bench` of a ``GpioDevice``: its gpiozero parts, driven directly."""

    def __init__(self, device: Any, clock: Clock | None = None) -> None:
        self.device = device
        self.clock: Clock = clock or device.clock

    def sensed(self) -> dict[str, bool]:
        d = self.device
        parts = {"touch": d.touch, "tray": d.tray, "pile_left": d.piles[0],
                 "pile_right": d.piles[1], "beam": d.beam}
        return {role: bool(part.is_active) for role, part in parts.items()}

    @property
    def pins(self) -> dict[str, int]:
        return dict(self.device.gpio.pins())

    @property
    def can_reverse(self) -> bool:
        return hasattr(self.device.motor, "backward")

    @property
    def has_light(self) -> bool:
        return self.device.led is not None

    @property
    def has_buzzer(self) -> bool:
        return self.device.buzzer is not None

    @property
    def divider_ratio(self) -> float:
        return float(self.device.gpio.divider_ratio)

    def run_motor(self, speed: float, seconds: float) -> None:
        """``speed`` for ``seconds`` (negative: backward), then off, whatever happens;
        through the device's own motor output, so the duty cap holds here too."""
        try:
            self.device._motor(speed if speed > 0 or self.can_reverse else 0.0)
            if seconds > 0:
                self.clock.sleep(seconds)
        finally:
            self.device._motor(0.0)

    def throw(self, pile: Pile) -> None:
        diverter = self.device.diverter
        if hasattr(diverter, "angle"):
            a = self.device.gpio.servo_angle
            diverter.angle = a if pile is Pile.RIGHT else -a
        else:
            diverter.value = int(pile)

    def light(self, colour: tuple[float, float, float]) -> None:
        if self.device.led is not None:
            self.device.led.color = colour

    def beep(self, seconds: float) -> None:
        buzzer = self.device.buzzer
        if buzzer is not None:
            try:
                buzzer.on()
                self.clock.sleep(seconds)
            finally:
                buzzer.off()

    def adc_volts(self) -> float | None:
        adc = self.device.adc
        if adc is None:
            return None
        return float(adc.value) * float(self.device.gpio.adc_vref)
