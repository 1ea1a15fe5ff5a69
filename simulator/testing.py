"""Pytest fixtures that run the provider simulator as a real process (``manage.py run_simulator``).

Registered in the repository's root conftest with ``pytest_plugins = ["simulator.testing"]``, for
the simulator's own tests and the product's alike.
"""

from collections.abc import Iterator

import pytest

from simulator.process import STARTUP_TIMEOUT_SECONDS, RunningSimulator, start_simulator


@pytest.fixture(scope="session")
def simulator_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningSimulator]:
    """Run one simulator for the whole session."""
    simulator = start_simulator(tmp_path_factory.mktemp("simulator") / "simulator.log", "--seed", "1")
    try:
        simulator.control.wait_until_up(STARTUP_TIMEOUT_SECONDS)
        yield simulator
    finally:
        simulator.stop()


@pytest.fixture
def simulator(simulator_process: RunningSimulator) -> RunningSimulator:
    """Return the session's simulator with no messages, counts or scripts left by earlier tests."""
    simulator_process.control.reset()
    return simulator_process
