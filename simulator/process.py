"""Running the provider simulator as a real process (``manage.py run_simulator``), for tests,
the chaos run and the benchmarks."""

import json
import select
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from simulator.control import SimulatorControl

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
