"""Run the examples in the docstrings: they are documentation that must stay true."""

import doctest
import importlib

import pytest

MODULES = ["shuffler.core.cards", "shuffler.core.mechanics", "shuffler.core.planning",
           "shuffler.device.clock",
           "shuffler.errors", "shuffler.config", "shuffler.config_table", "shuffler.core.mixing",
           "hardware_sim",
           "hardware_sim.faults", "shuffler.core.score", "shuffler.service.request",
           "shuffler.limits", "firmware_bridge.device", "hardware_sim.virtual_mcu"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0
