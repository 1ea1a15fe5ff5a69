"""e2e_*: this machine's capacity end to end, and what 0.5x, 1x and 2x of it do to the deliveries.

One stack stays up through the whole run: gunicorn serves the internal API, ``celery
worker`` (``POOL`` with ``WORKERS``: 8 threads, as in production; ``BENCH_E2E_WORKERS`` and
``BENCH_E2E_POOL`` change the count and the pool) steps the events, a second worker runs the lanes, ``celery
beat`` the sweeper, and the provider simulator answers with its default profile (delays,
failures, lost receipts), on PostgreSQL and Redis. Every offering is an open-loop client
creating events at a fixed rate: a mixed workload of half short links (``LIFETIMES``:
40 s) and half links three times longer, shuffled (seeded), across two regions whose
policies differ in SMS budget and poll interval (``REGIONS``). After each offering the
stack settles (every event terminal) and the event tables are emptied for the next; the
first is an unmeasured warm-up.

1. **Capacity.** Probe offered rates for ``PROBE_SECONDS`` each: from ``START_RATE``,
   doubling while a probe stays within the bound (halving while none has), then bisecting
   between the highest probe within it and the lowest beyond it until they are within
   ``PRECISION`` of each other (at most ``MAX_PROBES`` probes). The capacity is the highest
   rate within the bound. Within the bound means, at p99, under ``BOUND_MS``:

   - the fallback's claim lateness, the issue's own measure. It only samples the events
     that fell back to email (a fifth or so of them); a probe with fewer than
     ``MIN_CLAIMS`` claims is too small to judge by it, and says so;
   - the first step's lateness, from the creation to the SMS submit (or, for an event
     whose SMS was never submitted, its first move: the email claim or expiry). Every event
     samples it, and it is the one that shows overload within a short probe: the workers
     serve the most urgent due event first, so past capacity the fallback claims (older
     events) are still served on time while new events wait for their first step, until
     the wait outgrows the SMS budget and the claims turn late too;
   - and the API kept up: it accepted at least ``API_KEEPS_UP`` of the offered rate.

2. **Loads.** Offer ``LOADS`` (0.5x, 1x and 2x) of the capacity for ``SECONDS`` each, and
   report per load:

   - created/s, accepted over the offering's real length; terminal/s, the events that
     reached a terminal state over the offering and the drain of its backlog (below): the
     rate the stack absorbed the offering at. Not over the span to the last transition,
     whose tail (the last receipts, a rare 30 s hanging submit) says nothing of throughput;
   - claim and submit lateness p50/p99/max: from the moment the email fallback became
     allowed (the terminal SMS failure was recorded, or the deadline D) to the claim and to
     the email submit; and the first step's lateness, as above;
   - per lifetime class, the share of events that got a message with useful life left: an
     SMS the provider accepted before D and did not report failed, or an email the relay
     accepted while ``machine.email_has_useful_life`` still held (the email step's cost
     fits before expiry);
   - expired events whose fallback was claimable yet never claimed;
   - the backlog: the events whose next action was overdue by more than ``BOUND_MS`` (and
     not in a worker's hands) when the offering ended, and the time until none was: the
     drain time, after which the console would no longer say "The system is behind"
     (``runbook.console.answers.schedule_lag`` back under 1 s). Drained/s is that backlog over that
     time, a lower bound on the rate the backlog was served at (events falling due meanwhile
     are served too);
   - CPU from ``/proc``: the web's per creation over the offering (the simulator's status
     callbacks included), the step workers' per step from the offering's start until the
     stack settled (steps: the worker's ``"event": "step"`` log lines).

With ``profile=True`` (``make bench BENCH=e2e-profile``) py-spy samples the workers and
the web server through the 1x load; the summaries are printed and the raw stacks kept in
``bench/results/e2e/``. Every duration and the probe count can be shortened by environment
variables for a smoke run (``BENCH_E2E_SECONDS``, ``BENCH_E2E_PROBE_SECONDS``,
``BENCH_E2E_PROBES``): the figures of such a run measure nothing.
"""

import asyncio
import math
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp
import redis
from django.db import connection
from django.db.models import Min

from bench import database, processes
from bench import profile as profiling
from bench.api import creation_body
from bench.stats import spread
from config import lanes
from notify.models import Claim, Event, Observation, ServiceToken, Transition
from notify.rules import machine
from notify.rules.vocabulary import Channel, ClaimState, Normalized, State
from plumbing.clock import current_clock
from simulator.process import start_simulator

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "bench" / "results" / "e2e"
BROKER = "redis://127.0.0.1:6379/12"
# The production layout's step worker (deploy/Procfile.production), chosen by this benchmark:
# 8 threads in one process reached 70/s at 4.2-5.8 ms per step, 4 prefork processes 55/s at
# 5.3-6.5 ms (docs/benchmarks.md).
WORKERS = int(os.environ.get("BENCH_E2E_WORKERS", "8"))
POOL = os.environ.get("BENCH_E2E_POOL", "threads")
SECONDS = float(os.environ.get("BENCH_E2E_SECONDS", "20"))
LOADS = (0.5, 1.0, 2.0)  # multiples of the capacity
# As long as a load: a rate just past capacity builds its backlog slowly, and a shorter probe
# passed 65/s whose 20 s load then missed the bound (first step p99 8.3 s).
PROBE_SECONDS = float(os.environ.get("BENCH_E2E_PROBE_SECONDS", os.environ.get("BENCH_E2E_SECONDS", "20")))
WARM_UP_SECONDS = 5.0
MAX_PROBES = int(os.environ.get("BENCH_E2E_PROBES", "6"))
START_RATE = 20.0
PRECISION = 0.15
BOUND_MS = 1000.0
MIN_CLAIMS = 20
API_KEEPS_UP = 0.95
LIFETIMES = {"short": 40, "long": 120}  # seconds
# Seconds-scale policies, slower than the chaos run's: the simulator's receipts take seconds.
REGIONS = {
    "LOADA": {"poll_interval": 2, "sms_budget": 6, "fallback_reserve": 10, "lease_ttl": 5, "email_backoff": 1},
    "LOADB": {"poll_interval": 3, "sms_budget": 8, "fallback_reserve": 12, "lease_ttl": 5, "email_backoff": 1},
}
SETTLE_SECONDS = max(LIFETIMES.values()) + 30  # by then every event has expired, at the latest


@dataclass(frozen=True)
class Histories:
    """What the settled events' histories say (module docstring, step 2)."""

    terminal: int
    claims: int
    claim_late_ms: tuple[float, float, float]  # p50, p99, max
    submit_late_ms: tuple[float, float, float]
    first_step_late_ms: tuple[float, float, float]
    first_step_p99_ms: dict[str, float]  # lifetime class -> its first steps' lateness p99: who waited
    useful_pct: dict[str, float]  # lifetime class -> share of its events with a message of useful life
    expired_unclaimed: int


@dataclass(frozen=True)
class Run:
    """One offering at a fixed rate, measured once the stack settled."""

    offered_per_s: float
    created_per_s: float
    terminal_per_s: float
    backlog: int
    drain_s: float
    web_ms_per_creation: float
    worker_ms_per_step: float
    worker_rss_mb: float
    events: Histories


@dataclass(frozen=True)
class Figures:
    capacity: float
    probes: list[tuple[Run, str]]  # with the verdict on each
    loads: list[tuple[float, Run]]  # with its multiple of the capacity


def run(*, profile: bool = False) -> Figures:
    LOGS.mkdir(parents=True, exist_ok=True)
    _reset()
    token = ServiceToken.issue("e2e", now=current_clock().now())[1]
    with _Stack(WORKERS, POOL) as stack:
        asyncio.run(_warm_up(stack.api_port, token))
        _warm_up_workers(stack, token)
        capacity, probes = _find_capacity(stack, token)
        loads = []
        for multiple in LOADS:
            print(f"  {multiple:g}x capacity: {capacity * multiple:.1f}/s for {SECONDS:g} s")
            load = _offer_and_measure(stack, token, capacity * multiple, SECONDS, profile=profile and multiple == 1)
            loads.append((multiple, load))
    figures = Figures(capacity, probes, loads)
    print(_tables(figures))
    return figures


def _find_capacity(stack: "_Stack", token: str) -> tuple[float, list[tuple[Run, str]]]:
    """Return the highest probed rate within the bound, and every probe with its verdict.

    1. Probe ``START_RATE``; double the rate while a probe is within the bound, halve it
       while none has been.
    2. Once one probe is within and one beyond, probe halfway between the highest within
       and the lowest beyond, until they are within ``PRECISION`` of each other.
    """
    within: float | None = None
    beyond: float | None = None
    probes = []
    rate = START_RATE
    for _ in range(MAX_PROBES):
        probe = _offer_and_measure(stack, token, rate, PROBE_SECONDS)
        held, verdict = _verdict(probe)
        print(f"  probe {rate:.1f}/s: {verdict}")
        probes.append((probe, verdict))
        if held:
            within = rate
        else:
            beyond = rate
        if within is not None and beyond is not None and beyond - within <= PRECISION * within:
            break
        rate = rate * 2 if beyond is None else rate / 2 if within is None else (within + beyond) / 2
    if within is None:
        lowest = min(probe.offered_per_s for probe, _ in probes)
        print(f"  no probe stayed within the bound: the loads are offered relative to the lowest, {lowest:.1f}/s")
        return lowest, probes
    return within, probes


def _verdict(probe: Run) -> tuple[bool, str]:
    """Whether a probe stayed within the bound (module docstring, step 1), and what says so."""
    events = probe.events
    first_step = f"first step p99 {events.first_step_late_ms[1]:.0f} ms"
    claims = f"claim p99 {events.claim_late_ms[1]:.0f} ms over {events.claims} fallback claims"
    if events.claims < MIN_CLAIMS:
        claims = f"{events.claims} fallback claims, too few to judge by"
    checks = [
        (probe.created_per_s < API_KEEPS_UP * probe.offered_per_s, f"the API accepted {probe.created_per_s:.1f}/s"),
        (events.first_step_late_ms[1] >= BOUND_MS, first_step),
        (events.claims >= MIN_CLAIMS and events.claim_late_ms[1] >= BOUND_MS, claims),
    ]
    beyond = [reason for failed, reason in checks if failed]
    if beyond:
        return False, "beyond the bound: " + ", ".join(beyond)
    return True, f"within the bound: {first_step}, {claims}"


def _tables(figures: Figures) -> str:
    """The probes and the loads as markdown rows, each target beside its figure."""
    pool = f"{WORKERS} x {POOL or 'prefork'}"
    lines = [
        f"\n  capacity: {figures.capacity:.1f} events/s (target 100); step workers: {pool}\n",
        "| probe offered/s | created/s | first step p99 | fallback claims | claim p99 | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for probe, verdict in figures.probes:
        events = probe.events
        lines.append(
            f"| {probe.offered_per_s:.1f} | {probe.created_per_s:.1f} | {events.first_step_late_ms[1]:.0f} ms "
            f"| {events.claims} | {events.claim_late_ms[1]:.0f} ms | {verdict} |"
        )
    lines += [
        "",
        "| load | offered/s | created/s | terminal/s | claim lateness p50 / p99 / max (target p99 < 1 s to 1x) "
        "| submit lateness p50 / p99 / max | first step p99, short / long "
        "| useful life, short / long (target ≥ 99% short) | expired, fallback unclaimed (target 0) "
        "| backlog | drained in | drained/s (target ≥ capacity) "
        "| web CPU / creation | worker CPU / step (target ≤ 5 ms) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for multiple, load in figures.loads:
        events = load.events
        drained = f"{load.backlog / load.drain_s:.1f}" if load.drain_s else "no backlog"
        lines.append(
            f"| {multiple:g}x | {load.offered_per_s:.1f} | {load.created_per_s:.1f} | {load.terminal_per_s:.1f} "
            f"| {_ms(events.claim_late_ms)} | {_ms(events.submit_late_ms)} "
            f"| {events.first_step_p99_ms['short']:.0f} / {events.first_step_p99_ms['long']:.0f} ms "
            f"| {events.useful_pct['short']:.1f}% / {events.useful_pct['long']:.1f}% | {events.expired_unclaimed} "
            f"| {load.backlog} | {load.drain_s:.1f} s | {drained} | {load.web_ms_per_creation:.1f} ms "
            f"| {load.worker_ms_per_step:.1f} ms |"
        )
    return "\n".join(lines)


def _ms(values: tuple[float, float, float]) -> str:
    return " / ".join(f"{value:.0f}" for value in values) + " ms"


def _offer_and_measure(stack: "_Stack", token: str, rate: float, seconds: float, *, profile: bool = False) -> Run:
    """Offer ``rate`` creations per second for ``seconds``, wait for the backlog to drain and
    every event to end, measure, and empty the event tables for the next offering."""
    window_start = _log_time()
    recordings = stack.profile(seconds) if profile else []
    cpu_before = stack.cpu_seconds()
    created, offered_for = asyncio.run(_offer(stack.api_port, token, rate, seconds))
    cpu_offering = {role: used - cpu_before[role] for role, used in stack.cpu_seconds().items()}
    print(_cpu_budget(cpu_offering, offered_for, created))
    backlog, drain_s = _drain(timeout=SETTLE_SECONDS)
    for title, recording in recordings:
        print(profiling.report(f"{title}, {rate:.1f}/s", recording.wait()))
    _settle(timeout=SETTLE_SECONDS)
    steps = stack.steps_between(window_start, _log_time())
    worker_cpu = stack.cpu_seconds()["workers"] - cpu_before["workers"]
    events = _histories()
    database.reset_tables()
    return Run(
        offered_per_s=rate,
        created_per_s=created / offered_for,
        terminal_per_s=events.terminal / (offered_for + drain_s),
        backlog=backlog,
        drain_s=drain_s,
        web_ms_per_creation=cpu_offering["web"] * 1000 / max(created, 1),
        worker_ms_per_step=worker_cpu * 1000 / max(steps, 1),
        worker_rss_mb=stack.worker_rss_mb(),
        events=events,
    )


def _cpu_budget(cpu: dict[str, float], seconds: float, created: int) -> str:
    """Where the machine's CPU went during the offering: each part's share."""
    available = seconds * (os.cpu_count() or 1)
    parts = ", ".join(f"{role} {used:.1f}" for role, used in sorted(cpu.items(), key=lambda item: -item[1]))
    return (
        f"    {created} created; CPU during the offering: {sum(cpu.values()):.1f} of {available:.0f} "
        f"core-seconds ({parts})"
    )


def _reset() -> None:
    database.reset_tables()
    for region, scale in REGIONS.items():
        database.seconds_scale_policy(
            region, **{name: timedelta(seconds=value) for name, value in scale.items()}, email_attempt_limit=3
        )
    redis.Redis.from_url(BROKER).flushdb()


def _log_time() -> str:
    # The JSON log's "time" field format (asctime, UTC): "2026-12-03 08:24:26,252".
    now = datetime.now(UTC)
    return f"{now:%Y-%m-%d %H:%M:%S},{now.microsecond // 1000:03d}"


class _Stack:
    """Simulator, API server, workers and beat for the whole run; all stopped on exit."""

    def __init__(self, workers: int, pool: str) -> None:
        self.workers = workers
        self.pool = pool
        self.api_port = processes.free_port()
        self.processes: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> "_Stack":
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
        pool = ["--pool", self.pool] if self.pool else []
        self.worker = self._spawn(
            "worker",
            ["celery", "-A", "config", "worker", "--loglevel", "INFO", "--concurrency", str(self.workers), *pool,
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

    def profile(self, seconds: float) -> list[tuple[str, profiling.Recording]]:
        """Sample the worker pool and the web server (with their children) for ``seconds``."""
        return [
            (
                f"{name} ({'wall time' if wall else 'CPU'})",
                profiling.Recording(process.pid, LOGS / f"profile-{name}.txt", seconds=seconds, wall=wall),
            )
            for name, process, wall in (("worker", self.worker, False), ("web", self.web, False))
        ]

    def steps_between(self, start: str, end: str) -> int:
        """Worker steps logged between two log times (log times compare as strings)."""
        count = 0
        for line in (LOGS / "worker.log").read_text(errors="replace").splitlines():
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
    body = creation_body(random.Random(0), region=next(iter(REGIONS))) | {"reset_url": "http://plain.example.org/"}
    async with aiohttp.ClientSession() as session:

        async def refused() -> None:
            async with session.post(f"http://127.0.0.1:{port}/api/v1/events", json=body, headers=headers) as response:
                await response.read()

        await asyncio.gather(*(refused() for _ in range(48)))


def _warm_up_workers(stack: "_Stack", token: str) -> None:
    """Run a few seconds of events through the whole stack before the first probe, unmeasured:
    the first steps of each pool process (connections, first imports) made the first probe's
    first-step p99 ten times the next one's."""
    print(f"  warm-up: {START_RATE:g}/s for {WARM_UP_SECONDS:g} s, not measured")
    asyncio.run(_offer(stack.api_port, token, START_RATE, WARM_UP_SECONDS))
    _settle(timeout=SETTLE_SECONDS)
    database.reset_tables()


async def _offer(port: int, token: str, rate: float, seconds: float) -> tuple[int, float]:
    """Offer ``rate`` creations per second for ``seconds`` (open loop), the mixed workload in a
    seeded shuffle; return how many were accepted and how long the offering took."""
    rng = random.Random(1)
    count = int(rate * seconds)
    kinds = [(lifetime, region) for lifetime in LIFETIMES.values() for region in REGIONS]
    plan = (kinds * math.ceil(count / len(kinds)))[:count]
    rng.shuffle(plan)
    headers = {"Authorization": f"Bearer {token}"}
    accepted = 0

    async def create(session: aiohttp.ClientSession, lifetime: int, region: str) -> None:
        nonlocal accepted
        body = creation_body(rng, region=region, ttl_seconds=lifetime)
        async with session.post(f"http://127.0.0.1:{port}/api/v1/events", json=body, headers=headers) as response:
            text = await response.text()
            if response.status != 201:
                raise SystemExit(f"the API refused a creation: {response.status} {text}")
            accepted += 1

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64)) as session:
        started = time.monotonic()
        pending = []
        for number, (lifetime, region) in enumerate(plan):
            await asyncio.sleep(max(0.0, started + number / rate - time.monotonic()))
            pending.append(asyncio.create_task(create(session, lifetime, region)))
        await asyncio.gather(*pending)
        # Never shorter than the window: an API that keeps up took the offered time.
        return accepted, max(time.monotonic() - started, seconds)


def _drain(timeout: float) -> tuple[int, float]:
    """Return the backlog when the offering ended and the seconds until it was gone (module docstring)."""
    # Overdue beyond the bound and in no worker's hands: waiting for a worker, not being served.
    overdue = (
        "SELECT count(*) FROM notify_event WHERE next_action_at < now() - make_interval(secs => %s) "
        "AND (lease_expires_at IS NULL OR lease_expires_at <= now())"
    )
    bound = [BOUND_MS / 1000]
    started = time.monotonic()
    with connection.cursor() as cursor:
        cursor.execute(overdue, bound)
        backlog = waiting = int(cursor.fetchone()[0])
        while waiting and time.monotonic() - started < timeout:
            time.sleep(0.2)
            cursor.execute(overdue, bound)
            waiting = int(cursor.fetchone()[0])
    return backlog, time.monotonic() - started if backlog else 0.0


def _settle(timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and Event.objects.filter(act_by__isnull=False).exists():
        time.sleep(1)


def _histories() -> Histories:
    """Read the settled events' histories (module docstring, step 2)."""
    events = list(Event.objects.select_related("policy"))
    claims = list(Claim.objects.values_list("event_id", "channel", "state", "submitted_at"))
    sms = {event_id: (state, submitted) for event_id, channel, state, submitted in claims if channel == Channel.SMS}
    email_submitted = {event_id: submitted for event_id, channel, _, submitted in claims if channel == Channel.EMAIL}
    claimed = dict(Transition.objects.filter(to_state=State.EMAIL_CLAIMED).values_list("event_id", "at"))
    expired = dict(Transition.objects.filter(to_state=State.EXPIRED).values_list("event_id", "at"))
    sms_failed = _first_report(Channel.SMS, Normalized.TERMINAL_FAILURE, Normalized.REJECTED)
    sms_accepted = _first_report(Channel.SMS, Normalized.ACCEPTED, Normalized.PENDING, Normalized.DELIVERED)
    email_accepted = _first_report(Channel.EMAIL, Normalized.ACCEPTED)
    claim_late, submit_late, first_step_late = [], [], []
    first_step_by_class: dict[str, list[float]] = {lifetime: [] for lifetime in LIFETIMES}
    useful: dict[str, list[bool]] = {lifetime: [] for lifetime in LIFETIMES}
    expired_unclaimed = 0
    for event in events:
        deadline = machine.fallback_deadline(event, event.policy)
        sms_state, sms_submitted = sms[event.id]
        # Due at creation: the SMS submit, or whatever the event did first instead.
        first_step = sms_submitted or claimed.get(event.id) or expired.get(event.id)
        if first_step is not None:
            first_step_late.append(_ms_between(event.created_at, first_step))
            first_step_by_class[_lifetime_class(event)].append(first_step_late[-1])
        if event.id in claimed:
            failed_at = sms_failed.get(event.id)
            allowed = min(failed_at, deadline) if failed_at else deadline
            claim_late.append(_ms_between(allowed, claimed[event.id]))
            submitted = email_submitted[event.id]
            if submitted is not None:
                submit_late.append(_ms_between(allowed, submitted))
        elif event.state == State.EXPIRED and event.fallback_available:
            expired_unclaimed += 1
        sms_at, email_at = sms_accepted.get(event.id), email_accepted.get(event.id)
        useful[_lifetime_class(event)].append(
            (sms_at is not None and sms_at < deadline and sms_state != ClaimState.FAILED)
            or (email_at is not None and machine.email_has_useful_life(event, event.policy, email_at))
        )
    return Histories(
        terminal=sum(event.act_by is None for event in events),
        claims=len(claim_late),
        claim_late_ms=spread(claim_late),
        submit_late_ms=spread(submit_late),
        first_step_late_ms=spread(first_step_late),
        first_step_p99_ms={lifetime: spread(late)[1] for lifetime, late in first_step_by_class.items()},
        useful_pct={lifetime: 100 * sum(got) / max(len(got), 1) for lifetime, got in useful.items()},
        expired_unclaimed=expired_unclaimed,
    )


def _first_report(channel: Channel, *normalized: Normalized) -> dict[str, datetime]:
    """When each event was first reported ``normalized`` on ``channel``."""
    reports = Observation.objects.filter(channel=channel, normalized__in=normalized).values("event_id")
    return dict(reports.annotate(first=Min("recorded_at")).values_list("event_id", "first"))


def _ms_between(start: datetime, end: datetime) -> float:
    return (end - start).total_seconds() * 1000


def _lifetime_class(event: Event) -> str:
    lifetime = (event.expires_at - event.created_at).total_seconds()
    return min(LIFETIMES, key=lambda name: abs(LIFETIMES[name] - lifetime))
