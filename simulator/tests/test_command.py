"""``manage.py run_simulator`` as a process: its port line, its clean exit, its refusal of a bad profile."""

import signal
import subprocess
import sys

import pytest

from simulator.process import REPO_ROOT, start_simulator
from simulator.profile import DEFAULT_PROFILE


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_it_prints_one_port_line_and_exits_cleanly_on_a_signal(tmp_path, signum):
    simulator = start_simulator(tmp_path / "simulator.log")
    simulator.control.wait_until_up()

    code, printed_after_ports = simulator.stop(signum)

    assert (code, printed_after_ports) == (0, "")
    assert simulator.http_port > 0
    assert simulator.smtp_port > 0


def test_it_refuses_an_invalid_profile_naming_the_field(tmp_path):
    profile = tmp_path / "profile.toml"
    profile.write_text(DEFAULT_PROFILE.read_text().replace("[smtp.faults]\n", "[smtp.faults]\nbounce = 0.1\n"))

    finished = subprocess.run(
        [sys.executable, "manage.py", "run_simulator", "--http-port", "0", "--smtp-port", "0", "--profile", profile],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert finished.returncode != 0
    assert "invalid profile: smtp.faults.bounce: unknown key" in finished.stderr
