"""Pytest fixtures that run the provider simulator as a real process (``manage.py run_simulator``).

Registered in the root conftest with ``pytest_plugins = ["tests.simulator_process"]``.
"""

import json
import select
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from notify.simulator.control import SimulatorControl
from notify.transports import Transports
from notify.transports.smtp_email import SmtpEmail
from notify.transports.twilio_client import make_client
from notify.transports.twilio_sms import TwilioSms

REPO_ROOT = Path(__file__).resolve().parent.parent
STARTUP_TIMEOUT_SECONDS = 30.0


@dataclass(frozen=True)
class RunningSimulator:
    """A started simulator: where it listens, how to drive it, and where its log goes."""

    process: subprocess.Popen[str]
    base_url: str
    http_port: int
    smtp_port: int
    log_path: Path

    @property
    def control(self) -> SimulatorControl:
        return SimulatorControl(self.base_url)

    def log_text(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def stop(self, signum: int = signal.SIGTERM, timeout: float = 10.0) -> tuple[int, str]:
        """Signal the process and return its exit code and what it printed after the port line.

        A process that ignores the signal is killed, and the timeout re-raised.
        """
        if self.process.poll() is None:
            self.process.send_signal(signum)
        try:
            rest, _ = self.process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.communicate()
            raise
        return self.process.returncode, rest


def start_simulator(log_path: Path, *extra_args: str) -> RunningSimulator:
    """Start ``manage.py run_simulator`` on ephemeral ports and wait for its port line.

    stderr (the simulator's log) goes to ``log_path``: a file, not a pipe, so a chatty
    simulator can never block on a full pipe nobody reads.
    """
    command = [sys.executable, "manage.py", "run_simulator", "--http-port", "0", "--smtp-port", "0", *extra_args]
    with log_path.open("w", encoding="utf-8") as log:
        process = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=log, text=True)
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], STARTUP_TIMEOUT_SECONDS)
    line = process.stdout.readline() if ready else ""
    if not line:
        process.kill()
        process.wait()
        raise RuntimeError(f"the simulator did not start; its log:\n{log_path.read_text()}")
    ports = json.loads(line)
    return RunningSimulator(
        process=process,
        base_url=f"http://127.0.0.1:{ports['http_port']}",
        http_port=ports["http_port"],
        smtp_port=ports["smtp_port"],
        log_path=log_path,
    )


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


@pytest.fixture
def transports(simulator: RunningSimulator, settings) -> Transports:
    """The real adapters (twilio client, Django SMTP backend) pointed at the simulator."""
    # pytest-django swaps in the in-memory backend for every test; these talk real SMTP.
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST = "127.0.0.1"
    settings.EMAIL_PORT = simulator.smtp_port
    settings.EMAIL_USE_TLS = False
    settings.EMAIL_TIMEOUT = 5
    client = make_client(
        settings.TWILIO_ACCOUNT_SID, settings.TWILIO_AUTH_TOKEN, api_base=simulator.base_url, timeout=5
    )
    return Transports.guarded(TwilioSms(client), SmtpEmail())
