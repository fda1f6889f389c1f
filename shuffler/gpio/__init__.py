"""The gpiozero backend (``--device gpio``): the device (:mod:`shuffler.gpio.device`,
``GpioDevice``) and its parts: the hardware PWM chip, the touch gestures, the shutdown
backstop ``shuffler-safe`` and the bring-up self-test.

May import: shuffler.config and everything below it (device, core, pinmap).
"""
