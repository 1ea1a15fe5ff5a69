"""Real worker processes for integration tests: Celery on Redis, PostgreSQL, the simulator."""

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.db import connection

from config import lanes

REPO_ROOT = Path(__file__).resolve().parent.parent.parent


def worker_environment(*, simulator, public_base_url: str, **overrides: str) -> dict[str, str]:
    """The environment of a worker that shares this test's database, broker and simulator."""
    db = connection.settings_dict
    return {
        **os.environ,
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "TWILIO_API_BASE": simulator.base_url,
        "EMAIL_HOST": "127.0.0.1",
        "EMAIL_PORT": str(simulator.smtp_port),
        "EMAIL_USE_TLS": "0",
        "PUBLIC_BASE_URL": public_base_url,
        "NOTIFY_SWEEP_INTERVAL": "0.5",
        "NOTIFY_SWEEP_REDELIVER_AFTER": "2",
        "NOTIFY_SMS_LOOKUP_DELAY": "0.2",
        # Short client timeouts: a call in flight holds its claim for twice this long.
        "TWILIO_TIMEOUT": "2",
        "EMAIL_TIMEOUT": "2",
        "LOG_FORMAT": "json",
        **overrides,
    }


@dataclass
class CeleryWorker:
    """``celery worker`` (with embedded beat when ``beat``) as its own process group."""

    env: dict[str, str]
    log_path: Path
    beat: bool = False
    concurrency: int = 2
    # The steps and every lane (a production layout runs them in separate processes).
    queues: str = f"{lanes.STEP_QUEUE},{lanes.LANE_QUEUES}"
    process: subprocess.Popen[bytes] | None = field(default=None, init=False)

    def start(self) -> "CeleryWorker":
        command = [
            sys.executable, "-m", "celery", "-A", "config", "worker", "-Q", self.queues,
            "--loglevel", "INFO", "--concurrency", str(self.concurrency), "--without-heartbeat",
            "--without-gossip", "--without-mingle", "--hostname", f"w{id(self)}@%h",
        ]  # fmt: skip
        if self.beat:
            command += ["--beat", "--schedule", str(self.log_path.with_suffix(".beat"))]
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            command, cwd=REPO_ROOT, env=self.env, stdout=log, stderr=log, start_new_session=True
        )
        # A worker still importing Django when a test's event is created lets the event's
        # seconds-scale SMS budget run out before its first step (seen on a loaded CI box:
        # two workers starting together took longer than the 4 s budget), so a test would
        # prove its fallback instead of what it means to. Wait until Celery consumes.
        wait_for(self._ready, timeout=60, message=f"the worker logging to {self.log_path} to be ready")
        return self

    def _ready(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise AssertionError(f"the worker exited with {self.process.returncode}; see {self.log_path}")
        return b" ready." in self.log_path.read_bytes()

    def kill(self) -> None:
        """SIGKILL the whole group: the main process and its pool children, mid-whatever."""
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.kill()

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")


def wait_for(predicate, *, timeout: float, interval: float = 0.2, message: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {message}")
