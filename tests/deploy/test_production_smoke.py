"""The production example run as written: every process of deploy/Procfile.production under honcho, with
production settings (DEBUG off), after the documented deploy steps, on a fresh database.

An event made through the API is delivered through the simulator; the console's assets load in
Chromium from the web process itself, hashed and cached for a year; /metrics answers its token; the
probes answer; SIGTERM stops every process in its grace period, and an event whose step was in flight
when it came completes once the example is started again.

To refresh the console's screenshot in docs/operations.md, run it with
SMOKE_SCREENSHOT=docs/img/production-console.png (README, "Tests").
"""

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis
from django.conf import settings
from django.db import connection
from playwright.sync_api import Playwright, Response, expect, sync_playwright

from tests.browser.conftest import CHROMIUM, FLAGS
from tests.integration.processes import wait_for
from tests.test_demo import free_port, group_members

pytestmark = pytest.mark.postgres

REPO_ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PROCFILE = "deploy/Procfile.production"
PROCESSES = ("web", "steps", "lanes", "projections", "pager", "beat")
WORKERS = ("steps", "lanes", "projections", "pager")  # beat answers no ping: docs/operations.md says how it is watched
CONSOLE_USER, CONSOLE_PASSWORD = "ops", "smoke-test-console-password"
YEAR = "max-age=315360000, public, immutable"


@pytest.fixture
def database():
    """A fresh database on the suite's PostgreSQL server, dropped at the end; its URL."""
    entry = connection.settings_dict
    server = f"postgres://{entry['USER']}@{entry['HOST']}:{entry['PORT']}"
    name = f"{entry['NAME']}_production_smoke"
    with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    yield f"{server}/{name}"
    with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def environment(database, simulator, tmp_path):
    """What every process is given: production settings, the simulator as Twilio and the SMTP relay."""
    if not settings.CELERY_BROKER_URL.startswith("redis://"):
        pytest.fail(f"the smoke run needs a Redis broker of its own, not {settings.CELERY_BROKER_URL}")
    redis.Redis.from_url(settings.CELERY_BROKER_URL).flushdb()  # no wake-up left by another test
    port = free_port()
    inherited = {key: value for key, value in os.environ.items() if not key.startswith(("DJANGO_ALLOW", "NOTIFY_VAR"))}
    return inherited | {
        "PATH": f"{BIN}:{os.environ['PATH']}",  # the Procfile names gunicorn and celery
        "DATABASE_URL": database,
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "DJANGO_DEBUG": "false",
        # Plain HTTP on loopback: no TLS proxy in front (check --deploy on HTTPS: tests/runbook/test_security.py).
        "DJANGO_HTTPS": "false",
        "PORT": str(port),
        "PUBLIC_BASE_URL": f"http://127.0.0.1:{port}",
        "NOTIFY_VAR_DIR": str(tmp_path / "var"),  # STATIC_ROOT is var/static
        "BEAT_SCHEDULE_FILE": str(tmp_path / "celerybeat-schedule"),
        "TWILIO_API_BASE": simulator.base_url,
        "EMAIL_HOST": "127.0.0.1",
        "EMAIL_PORT": str(simulator.smtp_port),
        "EMAIL_USE_TLS": "false",
        "LOG_FORMAT": "json",
    }


def manage(environment: dict[str, str], *args: str, **extra: str) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=REPO_ROOT, env=environment | extra,
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, f"manage.py {' '.join(args)}: {result.stderr}"
    return result.stdout


@dataclass
class Example:
    """``honcho start -f deploy/Procfile.production``, as an operator starts it."""

    environment: dict[str, str]
    log_path: Path
    process: subprocess.Popen[bytes] | None = field(default=None, init=False)
    started_at: int = field(default=0, init=False)  # where this run's lines begin in the log

    @property
    def url(self) -> str:
        return self.environment["PUBLIC_BASE_URL"]

    def start(self) -> None:
        log = self.log_path.open("ab")
        self.started_at = log.tell()
        self.process = subprocess.Popen(
            [str(BIN / "honcho"), "start", "-f", PROCFILE], cwd=REPO_ROOT, env=self.environment,
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        wait_for(lambda: self.get("/readyz")[0] == 200, timeout=60, message="/readyz to answer 200")
        wait_for(self.workers_answer, timeout=60, message="every worker to answer a ping")

    def workers_answer(self) -> bool:
        """The Celery processes' liveness check, as docs/operations.md gives it."""
        host = socket.gethostname()
        nodes = ",".join(f"{name}@{host}" for name in WORKERS)
        ping = subprocess.run(
            [str(BIN / "celery"), "-A", "config", "inspect", "ping", "-d", nodes, "--timeout", "5"],
            cwd=REPO_ROOT, env=self.environment, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        return ping.returncode == 0 and ping.stdout.count("pong") == len(WORKERS)

    def groups(self) -> list[int]:
        """The process groups honcho started: each process in a group of its own, led by the pid it logs."""
        with self.log_path.open("rb") as log:
            log.seek(self.started_at)
            return [int(pid) for pid in re.findall(rb" started \(pid=(\d+)\)", log.read())]

    def stop(self) -> str:
        """SIGTERM to honcho, as an operator's Ctrl-C or a service manager's stop; return what it logged then."""
        assert self.process is not None
        groups = self.groups()
        assert len(groups) == len(PROCESSES)
        stopping_from = self.log_path.stat().st_size
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=60)
        for group in groups:
            assert group_members(group) == [], f"a process of group {group} outlived honcho"
        return self.log_path.read_bytes()[stopping_from:].decode(errors="replace")

    def kill(self) -> None:
        """Kill what is left: honcho and every group it started (left running, a failed run's workers
        would take the wake-ups of the tests after it)."""
        if self.process is None:
            return
        for group in [*self.groups(), self.process.pid]:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)
        self.process.wait()

    def get(self, path: str, **headers: str) -> tuple[int, dict[str, str], bytes]:
        return self._call(urllib.request.Request(self.url + path, headers=headers))

    def post(self, path: str, body: dict[str, object], **headers: str) -> tuple[int, dict[str, str], bytes]:
        data = json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path, data=data, headers=headers | {"Content-Type": "application/json"}
        )
        return self._call(request)

    @staticmethod
    def _call(request: urllib.request.Request) -> tuple[int, dict[str, str], bytes]:
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, dict(response.headers), response.read()
        except urllib.error.HTTPError as error:
            return error.code, dict(error.headers), error.read()
        except OSError:  # not listening yet, or no more
            return 0, {}, b""


@pytest.fixture
def example(environment, tmp_path):
    """The documented deploy on a fresh database (docs/operations.md, "Deploying"), then the processes."""
    manage(environment, "migrate", "--no-input")
    manage(environment, "load_policies")
    manage(environment, "collectstatic", "--no-input")
    manage(
        environment, "createsuperuser", "--no-input", "--username", CONSOLE_USER, "--email", "ops@example.org",
        DJANGO_SUPERUSER_PASSWORD=CONSOLE_PASSWORD,
    )  # fmt: skip
    running = Example(environment, tmp_path / "honcho.log")
    running.start()
    yield running
    running.kill()  # a failed test's leftovers; a passing one has stopped it already


def create_event(example: Example, token: str, phone: str) -> str:
    status, _, body = example.post(
        "/api/v1/events",
        {
            "client_key": f"smoke-{uuid.uuid4()}", "purpose": "password_reset", "region": "US", "phone": phone,
            "email": "smoke@example.org", "reset_url": "https://accounts.example.org/reset/smoke", "ttl_seconds": 600,
        },
        Authorization=f"Bearer {token}",
    )  # fmt: skip
    assert status == 201, body
    return str(json.loads(body)["event_id"])


def read_event(example: Example, token: str, event_id: str) -> dict[str, Any]:
    status, _, body = example.get(f"/api/v1/events/{event_id}", Authorization=f"Bearer {token}")
    assert status == 200, body
    answer: dict[str, Any] = json.loads(body)
    return answer


def test_the_production_example_delivers_serves_its_console_and_stops_and_restarts_cleanly(
    example, environment, simulator, tmp_path
):
    token = manage(environment, "create_service_token", "smoke").strip()

    # An event through the API, delivered through the simulator.
    simulator.control.script_sms("+14155550101", statuses=[("sent", 0.1), ("delivered", 0.3)])
    delivered = create_event(example, token, "+14155550101")
    wait_for(lambda: read_event(example, token, delivered)["state"] == "sms_delivered", timeout=30,
             message="the event to be delivered")  # fmt: skip
    assert simulator.control.counts()["sms"] == {delivered: 1}

    # The probes and /metrics, as a load balancer and Prometheus ask them.
    assert example.get("/healthz")[0] == 200
    http_status, _, body = example.get("/readyz")
    assert (http_status, json.loads(body)["status"]) == (200, "ready")
    assert example.get("/metrics", Authorization=f"Bearer {environment['METRICS_TOKEN']}")[0] == 200

    # The console in Chromium: every asset from the web process itself, hashed and cached for a year.
    assets: dict[str, tuple[int, str]] = {}
    problems: list[str] = []  # script errors and CSP violations, as the browser's console reports them

    def record(response: Response) -> None:
        if "/static/" in response.url:
            assets[response.url] = (response.status, response.headers.get("cache-control", ""))

    def look() -> tuple[str, str]:
        with sync_playwright() as playwright:
            return browse(playwright)

    def browse(playwright: Playwright) -> tuple[str, str]:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("response", record)
        page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
        page.goto(f"{example.url}/events/{delivered}")
        page.fill("#id_username", CONSOLE_USER)
        page.fill("#id_password", CONSOLE_PASSWORD)
        page.click("button[type=submit]")
        expect(page.get_by_text(delivered).first).to_be_visible()
        htmx_version = page.evaluate("window.htmx && htmx.version")
        header_background = page.eval_on_selector("header.top", "e => getComputedStyle(e).backgroundColor")
        target = os.environ.get("SMOKE_SCREENSHOT")
        page.screenshot(path=REPO_ROOT / target if target else tmp_path / "console.png", full_page=True)
        browser.close()
        return htmx_version, header_background

    # On a thread of its own: Playwright's sync API refuses a thread where an earlier test left an
    # asyncio loop running.
    with ThreadPoolExecutor(max_workers=1) as thread:
        htmx_version, header_background = thread.submit(look).result()
    loaded = {re.sub(r"^.*/static/|\.[0-9a-f]{12}(?=\.)", "", url): served for url, served in assets.items()}
    for name in ("runbook/console.css", "runbook/console.js", "django_htmx/htmx-2.min.js"):
        assert loaded.get(name) == (200, YEAR), (name, assets)
    assert htmx_version.startswith("2.")
    assert header_background not in ("", "rgba(0, 0, 0, 0)"), "the console's stylesheet did not apply"
    assert problems == []

    # SIGTERM while an event's step is in flight: the SMS create is held 2 s by the provider.
    simulator.control.script_sms(
        "+14155550102", create=["accept_late"], hang_seconds=2, statuses=[("sent", 0.1), ("delivered", 0.3)]
    )
    caught = create_event(example, token, "+14155550102")

    def submitting() -> bool:
        channels = read_event(example, token, caught)["channels"]
        return bool(channels) and channels[0]["claim_state"] == "submitting"

    wait_for(submitting, timeout=30, message="the SMS submit to be in flight")
    stopping = example.stop()

    assert "SIGKILL" not in stopping, stopping  # no process outlived honcho's grace
    for name in PROCESSES:
        assert f"{name}.1 stopped" in stopping, stopping
    assert "Shutting down: Master" in stopping  # gunicorn's own orderly exit
    assert stopping.count("Warm shutdown") == len(WORKERS)  # Celery's: running tasks finish first

    example.start()
    wait_for(lambda: read_event(example, token, caught)["state"] == "sms_delivered", timeout=60,
             message="the caught event to be delivered after the restart")  # fmt: skip
    assert simulator.control.counts()["sms"] == {delivered: 1, caught: 1}  # sent once, not again after the restart
    example.stop()
