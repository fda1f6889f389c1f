"""Run the examples in the docstrings: they are documentation that must stay true."""

import doctest
import importlib

import pytest

MODULES = ["shuffler.cards", "shuffler.mechanics", "shuffler.planning", "shuffler.clock",
           "shuffler.errors", "shuffler.config", "shuffler.mixing", "hardware_sim",
           "hardware_sim.faults", "shuffler.score"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0
