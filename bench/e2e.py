"""e2e_*: events per second end to end, the fallback's lateness, and the Celery ceiling.

For 1, 2 and 4 worker processes in turn: gunicorn serves the internal API, ``celery
worker --concurrency N`` and ``celery beat`` run the delivery, the provider simulator
answers (its default per-region profile: delays, failures, lost receipts) on
PostgreSQL and Redis. An open-loop client offers ``RATE`` creations per second for
``SECONDS``; then everything settles. Reported per worker count:

- events/s: creations the API accepted per second, and events that reached a terminal
  state per second of the run;
- steps/s: ``notify.advance`` steps per second, against the same workers running
  Celery's built-in no-op-like ``celery.accumulate`` (the ceiling);
- fallback lateness: from the moment the email fallback became allowed (the terminal SMS
  failure was recorded, or the deadline D) to the claim, and to the email submit;
- worker RSS (all pool processes).

With ``profile=True`` (``make bench BENCH=e2e-profile``) py-spy samples the workers and
the web server through the load window; the summaries are printed and the raw stacks
kept in ``bench/results/e2e/``.
"""

import asyncio
import os
import random
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp
import redis

from bench import processes
from bench import profile as profiling
from bench.api import creation_body
from config import lanes

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "bench" / "results" / "e2e"
BROKER = "redis://127.0.0.1:6379/12"
WORKER_COUNTS = (1, 2, 4)
RATE = 100.0
SECONDS = 20.0
NOOP_TASKS = 4000
REGION = "LOAD"  # the benchmark's own policy region
TTL_SECONDS = 40
SCALE = {"poll_interval": 2, "sms_budget": 6, "fallback_reserve": 10, "lease_ttl": 5, "email_backoff": 1}


@dataclass(frozen=True)
class Point:
    workers: int
    offered_per_s: float
    created_per_s: float
    terminal_per_s: float
    steps_per_s: float
    noop_per_s: float
    claim_late_ms: tuple[float, float, float]  # p50, p99, max
    submit_late_ms: tuple[float, float, float]
    rss_mb: float


def run(*, profile: bool = False) -> list[Point]:
    from notify.clock import current_clock
    from notify.models import ServiceToken

    LOGS.mkdir(parents=True, exist_ok=True)
    points = []
    for workers in WORKER_COUNTS:
        _reset()
        token = ServiceToken.issue("e2e", now=current_clock().now())[1]
        with _Stack(workers) as stack:
            asyncio.run(_warm_up(stack.api_port, token))
            noop = stack.noop_rate()
            window = (_log_time(), "")
            started = time.monotonic()
            recordings = stack.profile() if profile else []
            cpu_before = stack.cpu_seconds()
            created = asyncio.run(_offer(stack.api_port, token))
            window = (window[0], _log_time())
            cpu = {role: used - cpu_before[role] for role, used in stack.cpu_seconds().items()}
            for title, recording in recordings:
                print(profiling.report(f"{title}, {workers} worker(s)", recording.wait()))
            _settle(timeout=90)
            elapsed = time.monotonic() - started
            rss = stack.worker_rss_mb()
            steps = stack.steps_between(*window)
        point = _measure(workers, created, elapsed, steps, noop, rss)
        print(_cpu_budget(cpu, created, steps))
        print(
            f"  {workers} worker(s): created {point.created_per_s:.0f}/s of {RATE:.0f} offered, "
            f"terminal {point.terminal_per_s:.0f}/s, steps {point.steps_per_s:.0f}/s vs no-op "
            f"{point.noop_per_s:.0f}/s, claim lateness p50/p99/max {_ms(point.claim_late_ms)}, "
            f"submit {_ms(point.submit_late_ms)}, RSS {point.rss_mb:.0f} MB"
        )
        points.append(point)
    return points


def _cpu_budget(cpu: dict[str, float], created: int, steps: int) -> str:
    """Where the machine's CPU went during the load: each part's share, per creation and per step."""
    available = SECONDS * (os.cpu_count() or 1)
    parts = ", ".join(f"{role} {used:.1f}" for role, used in sorted(cpu.items(), key=lambda item: -item[1]))
    return (
        f"  CPU during the load: {sum(cpu.values()):.1f} of {available:.0f} core-seconds ({parts}); "
        f"web {cpu['web'] * 1000 / max(created, 1):.1f} ms per creation, "
        f"workers {cpu['workers'] * 1000 / max(steps, 1):.1f} ms per step"
    )


def _ms(values: tuple[float, float, float]) -> str:
    return "/".join(f"{value:.0f}" for value in values) + " ms"


def _reset() -> None:
    from bench import database

    database.reset_tables()
    # A slower scale than the chaos run's: receipts from the simulator's default profile take seconds.
    database.seconds_scale_policy(
        REGION, **{name: timedelta(seconds=value) for name, value in SCALE.items()}, email_attempt_limit=3
    )
    redis.Redis.from_url(BROKER).flushdb()


def _log_time() -> str:
    # The JSON log's "time" field format (asctime, UTC): "2026-12-03 08:24:26,252".
    now = datetime.now(UTC)
    return f"{now:%Y-%m-%d %H:%M:%S},{now.microsecond // 1000:03d}"


class _Stack:
    """Simulator, API server, workers and beat for one measurement; all stopped on exit."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.api_port = processes.free_port()
        self.processes: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> "_Stack":
        from simulator.process import start_simulator

        self.simulator = start_simulator(LOGS / "simulator.log", "--seed", "1")
        self.simulator.control.wait_until_up(30)
        self.env = {
            **os.environ,
            "CELERY_BROKER_URL": BROKER,
            "TWILIO_API_BASE": self.simulator.base_url,
            "EMAIL_HOST": "127.0.0.1",
            "EMAIL_PORT": str(self.simulator.smtp_port),
            "EMAIL_USE_TLS": "0",
            "PUBLIC_BASE_URL": f"http://127.0.0.1:{self.api_port}",
            "API_RATE_LIMIT": "100000000/min",
            "NOTIFY_SWEEP_INTERVAL": "1",
            "LOG_FORMAT": "json",
            "DJANGO_DEBUG": "0",
        }
        self.web = self._spawn("web", ["gunicorn", "config.wsgi", "-b", f"127.0.0.1:{self.api_port}",
                                       "-w", "3", "-k", "gthread", "--threads", "4"])  # fmt: skip
        self.worker = self._spawn(
            f"worker-{self.workers}",
            ["celery", "-A", "config", "worker", "--loglevel", "INFO", "--concurrency", str(self.workers),
             "--without-heartbeat", "--without-gossip", "--without-mingle"],
        )  # fmt: skip
        self.lanes = self._spawn(
            "lanes",
            ["celery", "-A", "config", "worker", "-Q", lanes.LANE_QUEUES, "--hostname", "lanes@%h", "--loglevel",
             "INFO", "--concurrency", "2", "--without-heartbeat", "--without-gossip", "--without-mingle"],
        )  # fmt: skip
        self.beat = self._spawn("beat", ["celery", "-A", "config", "beat", "--schedule", str(LOGS / "beat.db")])
        if not processes.wait_for_port(self.api_port):
            raise SystemExit(f"nothing listens on {self.api_port}; see {LOGS}")
        time.sleep(3)  # the pool's processes start
        return self

    def __exit__(self, *exc: object) -> None:
        for process in self.processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
        self.simulator.stop()

    def _spawn(self, name: str, command: list[str]) -> subprocess.Popen[bytes]:
        log = (LOGS / f"{name}.log").open("wb")
        binary = Path(sys.executable).parent / command[0]
        process = subprocess.Popen(
            [str(binary), *command[1:]], cwd=ROOT, env=self.env, stdout=log, stderr=log, start_new_session=True
        )
        self.processes.append(process)
        return process

    def profile(self) -> list[tuple[str, profiling.Recording]]:
        """Sample the worker pool and the web server (with their children) through the load window."""
        return [
            (
                f"{name} ({'wall time' if wall else 'CPU'})",
                profiling.Recording(
                    process.pid, LOGS / f"profile-{name}-{self.workers}.txt", seconds=SECONDS, wall=wall
                ),
            )
            for name, process, wall in (("worker", self.worker, True), ("web", self.web, False))
        ]

    def noop_rate(self) -> float:
        """Tasks per second the same workers run when each task does nothing: the ceiling."""
        from celery import Celery

        app = Celery(broker=BROKER)
        queue = redis.Redis.from_url(BROKER)
        for _ in range(NOOP_TASKS):
            app.send_task("celery.accumulate", args=(1,), ignore_result=True)
        started = time.monotonic()
        while queue.llen("celery") > 0:
            time.sleep(0.05)
        return NOOP_TASKS / (time.monotonic() - started)

    def steps_between(self, start: str, end: str) -> int:
        """Worker steps logged while the load was offered (log times compare as strings)."""
        count = 0
        for line in (LOGS / f"worker-{self.workers}.log").read_text(errors="replace").splitlines():
            if '"event": "step"' in line and start <= line[10:33] <= end:
                count += 1
        return count

    def cpu_seconds(self) -> dict[str, float]:
        """CPU time used so far by each part of the stack (the database and broker included)."""
        return {
            "web": processes.cpu_seconds(self.web.pid),
            "workers": processes.cpu_seconds(self.worker.pid),
            "beat": processes.cpu_seconds(self.beat.pid),
            "lanes": processes.cpu_seconds(self.lanes.pid),
            "simulator": processes.cpu_seconds(self.simulator.process.pid),
            "postgres": processes.cpu_seconds_of("postgres"),
            "redis": processes.cpu_seconds_of("redis-server"),
        }

    def worker_rss_mb(self) -> float:
        return processes.rss_mb(self.worker.pid)


async def _warm_up(port: int, token: str) -> None:
    """Make every web process load its URLconf and compile its validators' regular expressions
    (each once, a second of CPU in all) before anything is measured: creations refused for
    their last-checked field (a plain-HTTP reset link) do it without creating anything."""
    headers = {"Authorization": f"Bearer {token}"}
    body = creation_body(random.Random(0), region=REGION) | {"reset_url": "http://plain.example.org/"}
    async with aiohttp.ClientSession() as session:

        async def refused() -> None:
            async with session.post(f"http://127.0.0.1:{port}/api/v1/events", json=body, headers=headers) as response:
                await response.read()

        await asyncio.gather(*(refused() for _ in range(48)))


async def _offer(port: int, token: str) -> int:
    """Offer RATE creations per second for SECONDS (open loop); return how many were accepted."""
    rng = random.Random(1)
    headers = {"Authorization": f"Bearer {token}"}
    accepted = 0

    async def create(session: aiohttp.ClientSession) -> None:
        nonlocal accepted
        body = creation_body(rng, region=REGION, ttl_seconds=TTL_SECONDS)
        async with session.post(f"http://127.0.0.1:{port}/api/v1/events", json=body, headers=headers) as response:
            text = await response.text()
            if response.status != 201:
                raise SystemExit(f"the API refused a creation: {response.status} {text}")
            accepted += 1

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64)) as session:
        started = time.monotonic()
        pending = []
        for number in range(int(RATE * SECONDS)):
            await asyncio.sleep(max(0.0, started + number / RATE - time.monotonic()))
            pending.append(asyncio.create_task(create(session)))
        await asyncio.gather(*pending)
    return accepted


def _settle(timeout: float) -> None:
    from notify.models import Event

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and Event.objects.filter(act_by__isnull=False).exists():
        time.sleep(1)


def _measure(workers: int, created: int, elapsed: float, steps: int, noop: float, rss: float) -> Point:
    from notify import machine
    from notify.models import Claim, Event, Observation, Transition

    events = Event.objects.select_related("policy")
    terminal = events.filter(act_by__isnull=True)
    first = events.order_by("created_at").values_list("created_at", flat=True).first()
    last = Transition.objects.order_by("-at").values_list("at", flat=True).first()
    span = (last - first).total_seconds() if first and last else elapsed
    claim_late, submit_late = [], []
    claims = Transition.objects.filter(to_state="email_claimed").select_related("event__policy")
    submitted = dict(Claim.objects.filter(channel="email").values_list("event_id", "submitted_at"))
    failures = {
        event_id: at
        for event_id, at in Observation.objects.filter(channel="sms", normalized__in=["terminal_failure", "rejected"])
        .order_by("-recorded_at")
        .values_list("event_id", "recorded_at")
    }
    for claim in claims:
        event = claim.event
        allowed = failures.get(event.id)
        deadline = machine.fallback_deadline(event, event.policy)
        allowed = min(allowed, deadline) if allowed else deadline
        claim_late.append((claim.at - allowed).total_seconds() * 1000)
        submit_at = submitted.get(event.id)
        if submit_at is not None:
            submit_late.append((submit_at - allowed).total_seconds() * 1000)
    return Point(
        workers=workers,
        offered_per_s=RATE,
        created_per_s=created / SECONDS,
        terminal_per_s=terminal.count() / span,
        steps_per_s=steps / SECONDS,
        noop_per_s=noop,
        claim_late_ms=_spread(claim_late),
        submit_late_ms=_spread(submit_late),
        rss_mb=rss,
    )


def _spread(values: list[float]) -> tuple[float, float, float]:
    if len(values) < 2:
        return (values[0], values[0], values[0]) if values else (0.0, 0.0, 0.0)
    cuts = statistics.quantiles(values, n=100)
    return (statistics.median(values), cuts[98], max(values))
