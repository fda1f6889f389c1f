"""The electrical limits of the build, declared once. Pure: no imports, no I/O.

docs/hardware.md ("Limits"), the schematics' limits boxes (docs/make_schematic.py), the
controller's refusal of an over-voltage block and the self-test's battery step all read
these figures; ``tests/test_limits.py`` checks the docs quote them.

    >>> over_voltage(10.7) is None
    True
    >>> over_voltage(11.5).startswith("Battery 11.50 V is above")
    True
"""

from __future__ import annotations

#: the DRV8833's VM (recommended operating range): the 9 V side must stay inside it
DRIVER_VM_MIN_VOLTS = 2.7
DRIVER_VM_MAX_VOLTS = 10.8
#: the DRV8833's absolute maximum VM: past it the part can be damaged
DRIVER_VM_ABS_MAX_VOLTS = 11.8
#: the low end of the 9 V side the mechanism is specified for (a spent block under load)
BLOCK_MIN_VOLTS = 6.0
#: the spread of the monitor's readings of one block, in volts at the block: 16 readings of
#: CH0 may lie 13 mV apart (about 4 LSB of the MCP3008, the self-test's calibration spread)
#: and the divider multiplies that by about 4
MONITOR_SPREAD_VOLTS = 0.05
#: a reading above this may be a block above the driver's limit: nothing moves
OVER_VOLTS = round(DRIVER_VM_MAX_VOLTS - MONITOR_SPREAD_VOLTS, 2)

#: the MCP3008 (the Pi build's ADC): inputs 0 V to VREF (the Pi's 3V3), and its absolute
#: maximum, VDD + 0.6 V
ADC_VREF_VOLTS = 3.3
ADC_ABS_MAX_VOLTS = 3.9
#: the reading the battery monitor counts as full scale (the reference's last 3 %)
ADC_FULL_SCALE_VOLTS = 3.2
#: the Nano's ADC reads A0 against its 5 V (AVcc)
NANO_ADC_VREF_VOLTS = 5.0
#: the ATmega's internal reference, which the Nano's firmware measures AVcc against: 1.1 V
#: nominal, 1.0 to 1.2 V from chip to chip (the datasheet). Until a build names its own
#: (``make BANDGAP_MV=...``) a reading may be up to MAX / NOMINAL low: the over-voltage
#: check counts it so
BANDGAP_NOMINAL_MV, BANDGAP_MIN_MV, BANDGAP_MAX_MV = 1100, 1000, 1200
UNCALIBRATED_READS_LOW_BY = BANDGAP_MAX_MV / BANDGAP_NOMINAL_MV

#: the servo's frame: a new position is taken only at the next pulse, 20 ms apart
SERVO_FRAME_S = 0.020

#: what a reading of the 9 V side may be typed (the self-test's multimeter reading) or
#: simulated (``--sim-fault battery:VOLTS``) as: below, no block; above, a typo. Past the
#: driver's limit the reading is taken, and refused by name
TYPED_READING_MIN_VOLTS, TYPED_READING_MAX_VOLTS = 3.0, 15.0


# -- the first power-on's readings (shuffler.poweron, docs/hardware.md) -------------------
#: the multimeter the procedure assumes (docs/bom.md, "Tools"): the cheapest kind, a 2000-count
#: meter of ±(0.5 % + 2 digits) with 10 MΩ input, read on its 20 V range (0.01 V a digit)
METER_GAIN, METER_DIGITS, METER_DIGIT_VOLTS, METER_INPUT_OHMS = 0.005, 2, 0.01, 10e6
#: the divider's tolerance at TP3 the procedure allows: the ratio's worst case with 1 %
#: resistors (about 1.5 %), the meter's 10 MΩ across the tap (0.25 % low on the Pi's
#: 24.8 kΩ source), its gain on both readings (0.5 % each) and its 2 digits on each at the
#: lowest block (TP3 1.49 V at 6.0 V: 1.3 %; TP1 0.3 %): 4.4 % at worst
#: (``tests/test_poweron.py`` adds it up)
TAP_TOLERANCE = 0.05
#: the 9 V path's resistances: the documented blocks' worst internal resistance (their rest
#: and load curves in shuffler.core.battery lie 1.2 V apart at the pass's 0.40 A), F1 (about
#: 0.1 V at 0.4 A) and Q3 (AO3401A, about 50 mΩ)
BLOCK_OHMS, F1_OHMS, Q3_OHMS = 3.0, 0.25, 0.05
#: M1's stall at its rated 6 V (docs/bom.md: the MP winding); through the duty cap the block
#: gives the cap's share of it
MOTOR_STALL_AMPS = 0.7
#: TP1 against the J1 reading taken with SW1 off: at the idle 14 mA the block's own
#: resistance, F1 and Q3 cost under 0.05 V, and the meter's 2 digits either way; a pass's
#: 0.40 A costs 0.13 V in F1 and Q3 (PASS_DROP_VOLTS) and up to 1.3 V from the block's rest
#: volts (PASS_SAG_VOLTS), a stalled motor (0.50 A from the block) up to 1.6 V
IDLE_DROP_VOLTS, PASS_DROP_VOLTS = 0.07, 0.13
PASS_SAG_VOLTS, STALL_SAG_VOLTS = 1.3, 1.6
#: Q3's (AO3401A) body diode on a meter's diode test (about 1 mA)
BODY_DIODE_VOLTS = (0.40, 0.80)
#: the motor's winding across J2 (a 6 V N20: about 9 Ω at its 0.7 A stall), with the brushes
MOTOR_OHMS = (3.0, 40.0)
#: U5 (Pololu D24V5F5): 5 V, ±4 %
BUCK_VOLTS = (4.80, 5.20)
#: the Pi's 3V3 at U2 VDD; the Nano's 5 V from USB
PI_3V3 = (3.20, 3.40)
NANO_5V = (4.40, 5.25)  # USB's 5 V less the Nano's own diode
#: the logic rail (the Pi's 3V3, the Nano's 5V) to GND with nothing powered: on ohms, over
#: this once C5 and the modules' capacitors have charged (a short reads a few ohms); on the
#: diode test (about 1 mA), at least RAIL_DIODE_VOLTS or OL: the modules' IR LEDs conduct
#: from about 1.0 V, while D4 mirrored puts its two Schottkys in series across the rail
#: (2 × 0.24–0.32 V at 1 mA) and a module on backwards its chips' protection diode (0.5–0.7 V)
RAIL_OHMS, RAIL_DIODE_VOLTS = 1000.0, 0.90
#: what "0 V" means at a node held low or switched off
ZERO_VOLTS = 0.1
#: the ohms a steady continuity beep means (under it: a short)
SHORT_OHMS = 50.0


def over_voltage(volts: float, reads_low_by: float = 1.0) -> str | None:
    """Why a block reading ``volts`` must not drive the mechanism, or None when it may.
    ``reads_low_by``: how far below the block the reading may be (an uncalibrated Nano's
    bandgap: :data:`UNCALIBRATED_READS_LOW_BY`); the check takes the worst case.

    >>> over_voltage(10.56) is None, over_voltage(10.56, UNCALIBRATED_READS_LOW_BY) is None
    (True, False)
    """
    worst = volts * reads_low_by
    if worst <= OVER_VOLTS:
        return None
    if reads_low_by > 1.0:
        return (f"Battery {volts:.2f} V as read, up to {worst:.2f} V: this Nano's reading is "
                f"not calibrated (its {BANDGAP_NOMINAL_MV / 1000:g} V bandgap is "
                f"{BANDGAP_MIN_MV / 1000:g} to {BANDGAP_MAX_MV / 1000:g} V from chip to chip), "
                f"and the DRV8833's {DRIVER_VM_MAX_VOLTS:g} V limit comes first (refused "
                f"above {OVER_VOLTS:g} V). Measure the block with a meter: above "
                f"{DRIVER_VM_MAX_VOLTS:g} V, use a 9 V block (6 or 7 cells); under it, "
                "calibrate the Nano (docs/firmware.md, \"The battery reading\": flash it "
                "built with BANDGAP_MV) and try again.")
    return (f"Battery {volts:.2f} V is above the DRV8833's {DRIVER_VM_MAX_VOLTS:g} V limit "
            f"(its VM; refused above {OVER_VOLTS:g} V, the limit less the monitor's "
            f"{MONITOR_SPREAD_VOLTS:g} V spread): a 12 V supply or an 8-cell NiMH block "
            f"overdrives the driver (absolute maximum {DRIVER_VM_ABS_MAX_VOLTS:g} V) and "
            "Q3's gate. Use a 9 V block (6 or 7 cells).")
