"""`make demo` as a newcomer runs it: everything starts on the embedded defaults, the
console answers, events are processed, and Ctrl-C stops every process."""

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
TERMINAL = ("sms_delivered", "email_accepted", "email_failed", "expired", "sms_failed")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes in the process group ``pgid``."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(stat.parent.name))
    return members


def wait_until(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.5)
    raise AssertionError(f"demo: timed out after {timeout}s waiting for {what}")


@pytest.fixture
def demo(tmp_path):
    port = free_port()
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DATABASE_URL", "CELERY_", "TWILIO_", "EMAIL_", "DJANGO_SECRET", "NOTIFY_"))
    }
    env |= {
        "PATH": f"{Path(sys.executable).parent}:{env['PATH']}",
        "NOTIFY_VAR_DIR": str(tmp_path / "var"),
        "DEMO_PORT": str(port),
        "DEMO_RATE": "2",
        "SIMULATOR_HTTP_PORT": str(free_port()),
        "SIMULATOR_SMTP_PORT": str(free_port()),
    }
    log = (tmp_path / "demo.log").open("w")
    process = subprocess.Popen(
        [str(REPO_ROOT / "deploy" / "demo.sh")], cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    yield process, port, tmp_path
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def test_the_demo_serves_the_console_processes_events_and_stops_on_ctrl_c(demo):
    process, port, tmp_path = demo

    def console_answers():
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/accounts/login/", timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    def processed():
        database = tmp_path / "var" / "embedded.sqlite3"
        if not database.exists():
            return 0
        with sqlite3.connect(database, timeout=5) as db:
            try:
                query = f"SELECT count(*) FROM notify_event WHERE state IN ({', '.join('?' * len(TERMINAL))})"
                (count,) = db.execute(query, TERMINAL).fetchone()
            except sqlite3.OperationalError:  # not migrated yet
                return 0
        return count >= 3

    wait_until(console_answers, 90, "the console to answer")
    wait_until(processed, 90, "three events to reach a terminal state")
    process.send_signal(signal.SIGINT)
    process.wait(timeout=30)

    wait_until(lambda: not group_members(process.pid), 15, "every demo process to exit")
    log = (tmp_path / "demo.log").read_text()
    assert "Demo login: demo / demo-reset-delivery" in log
