#!/bin/sh
# The machine's cards, on the simulated chip's lines, run in the guest beside the service
# (tests/vm/machine.py copies it to /usr/local/bin/shuffler-vm-feeder): while the motor
# line reads high, CARDS cards cross the beam, each blocking it BLOCK seconds and then
# leaving it clear GAP seconds, as the IR beam sees a card go by; the tray reads empty
# once the last card is in the beam. Levels as docs/hardware.md wires them: the beam and the tray pull up (clear,
# empty) and a card or a loaded tray pulls them down.
# Then the dealer's stack, as a dealer who follows the light: with the piles given (the
# pile sensors' lines, LEFT then RIGHT, and the LED's red, green and blue lines), both
# piles lie on their sensors (lines low) from the first card on; once the motor has
# stopped and the light asks for the stack (blue lit, green dark: STACK LEFT is blue,
# STACK RIGHT magenta, so the red line high means RIGHT), the pile it shows is lifted
# first (its line pulled up), the other STACK_GAP seconds later: after the last pass too,
# where the hand waits for that stack before it is finished.
#   shuffler-vm-feeder MOTOR BEAM TRAY CARDS BLOCK GAP [WAIT_S [LEFT RIGHT RED GREEN BLUE]]
set -eu
motor=$1 beam=$2 tray=$3 cards=$4 block=$5 gap=$6 wait_s=${7:-120}
left=${8:-} right=${9:-} red=${10:-} green=${11:-} blue=${12:-}
#: seconds between the two lifts: well over [mechanism] both_window_s (0.15 s), which
#: the service's callbacks, late under emulation, must still see apart
STACK_GAP=2
line() { echo /sys/devices/platform/gpio-sim.0/gpiochip*/sim_gpio"$1"; }
motor_value=$(line "$motor")/value
beam_pull=$(line "$beam")/pull
tray_pull=$(line "$tray")/pull
# the roller moves a card only while it turns forward: before each card, wait for the
# motor line to read high (a PWM'd line is high part of each period: reads 50 ms apart
# catch it); while the motor is stopped or backing a card out, no card comes
tries=$((wait_s * 20))
forward() {
    until [ "$(cat "$motor_value")" = 1 ]; do
        tries=$((tries - 1))
        if [ "$tries" -le 0 ]; then echo "feeder: the motor line stayed low" >&2; exit 1; fi
        sleep 0.05
    done
}
forward
echo "feeder: motor high, feeding $cards cards"
# the first card reaches the beam a gap after the roller starts, as each later card does
# after the one before: the roller carries it from the tray. The engine counts a card
# from full speed on (soft_start_s, 0.1 s); a card in the beam the moment the line first
# reads high came before the ramp ended, and went uncounted (CI: 23 of 24, once)
sleep "$gap"
i=0
while [ "$i" -lt "$cards" ]; do
    forward
    echo pull-down > "$beam_pull"
    if [ "$i" -eq 0 ] && [ -n "$left" ]; then  # the piles lie on their sensors
        echo pull-down > "$(line "$left")/pull"
        echo pull-down > "$(line "$right")/pull"
    fi
    i=$((i + 1))
    # the last card has left the tray by the time it blocks the beam
    if [ "$i" -eq "$cards" ]; then echo pull-up > "$tray_pull"; fi
    sleep "$block"
    echo pull-up > "$beam_pull"
    sleep "$gap"
done
echo "feeder: fed $cards cards, tray empty"
[ -n "$left" ] || exit 0
# the stack: once the light asks for it (blue on, green off: not READY, not RUNNING's
# white), read twice 50 ms apart, the pile it shows first
lit() { cat "$(line "$1")/value"; }
tries=$((wait_s * 20))
asks() { [ "$(lit "$blue")" = 1 ] && [ "$(lit "$green")" = 0 ] && [ "$(cat "$motor_value")" = 0 ]; }
until asks && sleep 0.05 && asks; do
    tries=$((tries - 1))
    if [ "$tries" -le 0 ]; then echo "feeder: the light never asked for the stack" >&2; exit 1; fi
    sleep 0.05
done
if [ "$(lit "$red")" = 1 ]; then first=$right second=$left name=RIGHT
else first=$left second=$right name=LEFT; fi
echo pull-up > "$(line "$first")/pull"
sleep "$STACK_GAP"
echo pull-up > "$(line "$second")/pull"
echo "feeder: stacked, the $name pile lifted first as the light asked"
