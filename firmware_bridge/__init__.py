"""The serial link to a shuffler whose motors sit behind a microcontroller.

The host keeps the logic; the microcontroller owns its own safety. Frames are
COBS-encoded and end with a zero byte; inside each, a sequence number, a message
type, a payload and a CRC-16/CCITT-FALSE. See docs/protocol.md; the virtual
microcontroller in :mod:`hardware_sim.virtual_mcu` is its executable reference.
"""
