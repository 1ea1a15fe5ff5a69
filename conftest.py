"""Fixtures shared by the product's tests (tests/) and the simulator's (simulator/tests/)."""

# The provider simulator as a real process, for both.
pytest_plugins = ["simulator.testing"]
