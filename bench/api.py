"""api_creations_per_s: event creations per second through the HTTP API, in production dress.

gunicorn (not the dev server) serves the project on PostgreSQL, with wake-ups going
to Redis; an asyncio client on loopback keeps ``CONCURRENCY`` requests in flight.
The ceiling is the same server, token check and rate limiter answering
``GET /api/v1/whoami``, which does no work of its own: what the framework allows.
Rounds alternate the order of the two and the median-ratio round is reported.

Then, on the same server: creations offered open-loop at ``OPEN_LOOP_RATE`` (Poisson
arrivals, each latency counted from when the request was due, so a slow server cannot
slow the load that measures it), and signed Twilio status callbacks ("sent", then
"delivered") for events waiting on their SMS, with the web's CPU per callback.
"""

import asyncio
import json
import logging
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import redis
from django.conf import settings
from django.core.management import call_command
from twilio.request_validator import RequestValidator

from bench import processes
from bench.stats import spread
from notify.api.events import reset_request
from notify.api.schemas import CreateEvent
from notify.messages import sms_callback_url
from notify.models import Claim, Event, Observation, ServiceToken, Transition, VaultEntry
from notify.rules.plan import ObservationInput
from notify.rules.vocabulary import Channel, Normalized, Source
from notify.writes.create import create_event
from notify.writes.moves import record_receipt
from plumbing.clock import current_clock
from simulator.fictional import fictional_phone

ROOT = Path(__file__).resolve().parent.parent
BROKER = "redis://127.0.0.1:6379/14"
CONCURRENCY = 16
RECONNECT_EVERY = 50  # requests a drive's client sends on one connection before it opens another
SECONDS = 8.0
ROUNDS = 3
OPEN_LOOP_RATE = 100.0  # creations/s offered
OPEN_LOOP_SECONDS = 20.0
CALLBACK_EVENTS = 1500  # each gets two callbacks
BODIES = 24_000  # creations a drive may send: 3,000/s for SECONDS, several times what it reaches
WARM_UP_REQUESTS = 200  # per kind, each on a new connection, so every server process gets some
# deploy/Procfile.production's web set-up on this 2-core machine: two processes per core, 4 threads each.
GUNICORN = ["--workers", "4", "--worker-class", "gthread", "--threads", "4", "--backlog", "512"]
# Clients fetching a page that computes (the OpenAPI document, some 15 ms of CPU each) beside the
# open loop, kept alive as a load balancer's connections are: a server's set-up must keep the
# creations' latency while some of its requests hold a core.
HEAVY_CLIENTS = 4
HEAVY_PATH = "/api/v1/openapi.json"


@dataclass(frozen=True)
class Load:
    rate: float
    p50_ms: float
    p99_ms: float
    cpu_ms: float  # the server's CPU per request (all gunicorn processes, from /proc)
    requests: int = 0
    # PostgreSQL's CPU per request (every postgres process): it shares the machine's cores
    # with the server and the client, so what a request costs it bounds the rate too.
    db_cpu_ms: float = 0.0


@dataclass(frozen=True)
class Figures:
    create: Load
    ceiling: Load
    open_loop: Load  # creations at OPEN_LOOP_RATE offered
    open_loop_beside_heavy: Load  # the same, with HEAVY_CLIENTS fetching HEAVY_PATH all along
    callback: Load


def run() -> Figures:
    call_command("load_policies", verbosity=0)
    token = ServiceToken.issue("bench", now=current_clock().now())[1]
    port = processes.free_port()
    server = _start_gunicorn(port)
    try:
        _forget_events()
        asyncio.run(_warm_up(port, token))
        rounds = []
        for number in range(ROUNDS):
            _forget_events()
            order = ("create", "ceiling") if number % 2 == 0 else ("ceiling", "create")
            loads = {name: _measured(name, port, token, server.pid) for name in order}
            print(
                f"  round {number + 1}: create {loads['create'].rate:.0f}/s "
                f"(p50 {loads['create'].p50_ms:.1f} ms, p99 {loads['create'].p99_ms:.1f} ms, "
                f"{loads['create'].cpu_ms:.1f} ms web CPU, {loads['create'].db_cpu_ms:.1f} ms PostgreSQL), "
                f"whoami {loads['ceiling'].rate:.0f}/s (p99 {loads['ceiling'].p99_ms:.1f} ms, "
                f"{loads['ceiling'].cpu_ms:.1f} ms web CPU, {loads['ceiling'].db_cpu_ms:.1f} ms PostgreSQL)"
            )
            rounds.append((loads["create"].rate / loads["ceiling"].rate, loads))
        _, median = sorted(rounds, key=lambda pair: pair[0])[len(rounds) // 2]
        _forget_events()
        open_loop = _measured_open_loop(port, token, server.pid)
        print(
            f"  open loop, {OPEN_LOOP_RATE:g} creations/s offered: {open_loop.rate:.0f}/s answered, "
            f"p50 {open_loop.p50_ms:.1f} ms, p99 {open_loop.p99_ms:.1f} ms, {open_loop.cpu_ms:.1f} ms web CPU"
        )
        _forget_events()
        beside_heavy = _measured_open_loop(port, token, server.pid, heavy_clients=HEAVY_CLIENTS)
        print(
            f"  open loop beside {HEAVY_CLIENTS} clients fetching {HEAVY_PATH}: {beside_heavy.rate:.0f}/s answered, "
            f"p50 {beside_heavy.p50_ms:.1f} ms, p99 {beside_heavy.p99_ms:.1f} ms"
        )
        _forget_events()
        callback = _measured_callbacks(port, server.pid)
        print(
            f"  callbacks: {callback.rate:.0f}/s, p50 {callback.p50_ms:.1f} ms, p99 {callback.p99_ms:.1f} ms, "
            f"{callback.cpu_ms:.2f} ms web CPU"
        )
        return Figures(median["create"], median["ceiling"], open_loop, beside_heavy, callback)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
        redis.Redis.from_url(BROKER).flushdb()


def _start_gunicorn(port: int) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "CELERY_BROKER_URL": BROKER,
        "API_RATE_LIMIT": "100000000/min",
        "LOG_LEVEL": "WARNING",
        "DJANGO_DEBUG": "0",
    }
    command = [sys.executable, "-m", "gunicorn", "config.wsgi:application", "--bind", f"127.0.0.1:{port}", *GUNICORN]
    log = (ROOT / "bench" / "results" / "gunicorn.log").open("wb")
    server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=log)
    if processes.wait_for_port(port):
        return server
    server.kill()
    raise SystemExit("gunicorn did not start; see bench/results/gunicorn.log")


def _measured(name: str, port: int, token: str, server: int) -> Load:
    """Drive ``name`` and charge the server's CPU over the drive to its requests."""
    return _charged(server, lambda: asyncio.run(_drive(name, port, token)))


def _measured_open_loop(port: int, token: str, server: int, *, heavy_clients: int = 0) -> Load:
    rng = random.Random("open loop")
    count = round(OPEN_LOOP_RATE * OPEN_LOOP_SECONDS)
    bodies = [json.dumps(creation_body(rng)).encode() for _ in range(count)]
    gaps = [rng.expovariate(OPEN_LOOP_RATE) for _ in range(count)]
    drive = _open_loop(port, token, bodies, gaps)
    return _charged(server, lambda: asyncio.run(_beside_heavy(port, heavy_clients, drive)))


def _measured_callbacks(port: int, server: int) -> Load:
    pending = pending_sms_events(CALLBACK_EVENTS, "bench-callbacks")
    posts = [
        tuple(signed_callback(event_id, sid, status) for status in ("sent", "delivered")) for event_id, sid in pending
    ]
    load = _charged(server, lambda: asyncio.run(_post_callbacks(port, posts)))
    delivered = Event.objects.filter(state="sms_delivered").count()
    if delivered != CALLBACK_EVENTS:
        raise SystemExit(f"callbacks: {delivered} of {CALLBACK_EVENTS} events delivered")
    return load


def _charged(server: int, drive: Callable[[], Load]) -> Load:
    """Run ``drive`` and charge the server's CPU over it (every gunicorn process) to its requests."""
    before, db_before = processes.cpu_seconds(server), processes.cpu_seconds_of("postgres")
    load = drive()
    per_request = 1000 / max(load.requests, 1)
    return replace(
        load,
        cpu_ms=(processes.cpu_seconds(server) - before) * per_request,
        db_cpu_ms=(processes.cpu_seconds_of("postgres") - db_before) * per_request,
    )


async def _warm_up(port: int, token: str) -> None:
    """Creations and whoamis, each on a new connection, so that every server process has
    compiled its validators and opened its connections before anything is measured."""
    base = f"http://127.0.0.1:{port}/api/v1"
    headers = {"Authorization": f"Bearer {token}"}
    rng = random.Random("warm up")
    connector = aiohttp.TCPConnector(force_close=True)
    async with aiohttp.ClientSession(connector=connector) as session:
        for _ in range(WARM_UP_REQUESTS):
            for request in (
                session.post(f"{base}/events", json=creation_body(rng), headers=headers),
                session.get(f"{base}/whoami", headers=headers),
            ):
                async with request as response:
                    await response.read()
                    _check("warm up", response.status, await response.text())


def _check(name: str, status: int, text: str) -> None:
    if status >= 300:
        raise SystemExit(f"{name}: unexpected {status}: {text}")


async def _drive(name: str, port: int, token: str) -> Load:
    """Keep CONCURRENCY requests in flight for SECONDS; return the rate and latencies of the 2xx ones."""
    base = f"http://127.0.0.1:{port}/api/v1"
    headers = {"Authorization": f"Bearer {token}"}
    json_headers = {**headers, "Content-Type": "application/json"}
    latencies: list[float] = []
    # Bodies made before the clock starts: the client shares the two cores with the server,
    # and building and encoding each body as it went cost it 0.3 ms a creation.
    rng = random.Random(name)
    bodies = iter([json.dumps(creation_body(rng)).encode() for _ in range(BODIES if name == "create" else 0)])
    stop_at = time.monotonic() + SECONDS

    async def client() -> None:
        while time.monotonic() < stop_at:
            # A connection of its own, for RECONNECT_EVERY requests: kept alive, a connection
            # stays with the server process that accepted it, and sixteen accepted at once land
            # unevenly (one process often had none; a whoami drive once ran on about one
            # process's CPU, 776/s against 1,500). Opened again and again, the drive's load
            # spreads over the processes as many clients' would.
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1)) as session:
                for _ in range(RECONNECT_EVERY):
                    if time.monotonic() >= stop_at:
                        break
                    await request_once(session)

    async def request_once(session: aiohttp.ClientSession) -> None:
        started = time.perf_counter()
        if name == "create":
            body = next(bodies, None)
            if body is None:
                raise SystemExit(f"create: more than {BODIES} creations in {SECONDS:g} s; raise BODIES")
            request = session.post(f"{base}/events", data=body, headers=json_headers)
        else:
            request = session.get(f"{base}/whoami", headers=headers)
        async with request as response:
            await response.read()
            _check(name, response.status, await response.text())
        latencies.append(time.perf_counter() - started)

    started = time.monotonic()
    await asyncio.gather(*(client() for _ in range(CONCURRENCY)))
    elapsed = time.monotonic() - started
    p50, p99, _ = spread(latencies)
    return Load(len(latencies) / elapsed, p50 * 1000, p99 * 1000, cpu_ms=0.0, requests=len(latencies))


async def _beside_heavy(port: int, clients: int, drive: Coroutine[Any, Any, Load]) -> Load:
    """Run ``drive`` while ``clients`` fetch HEAVY_PATH one request after another, each on a kept connection."""
    stop = asyncio.Event()

    async def fetch() -> None:
        async with aiohttp.ClientSession() as session:
            while not stop.is_set():
                async with session.get(f"http://127.0.0.1:{port}{HEAVY_PATH}") as response:
                    await response.read()
                    _check("heavy page", response.status, await response.text())

    fetching = [asyncio.create_task(fetch()) for _ in range(clients)]
    try:
        return await drive
    finally:
        stop.set()
        await asyncio.gather(*fetching)


async def _open_loop(port: int, token: str, bodies: list[bytes], gaps: list[float]) -> Load:
    """Send each body when it is due (Poisson gaps), whatever is still in flight.

    A latency runs from when its request was due, not from when it was sent: a client
    that fell behind the schedule would otherwise hide the server's queue from the figure.
    """
    url = f"http://127.0.0.1:{port}/api/v1/events"
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    latencies: list[float] = []

    async def send(session: aiohttp.ClientSession, body: bytes, due: float) -> None:
        async with session.post(url, data=body, headers=headers) as response:
            await response.read()
            _check("open loop", response.status, await response.text())
        latencies.append(time.perf_counter() - due)

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        started = due = time.perf_counter()
        in_flight = []
        for body, gap in zip(bodies, gaps, strict=True):
            due += gap
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            in_flight.append(asyncio.create_task(send(session, body, due)))
        await asyncio.gather(*in_flight)
        elapsed = time.perf_counter() - started
    p50, p99, _ = spread(latencies)
    return Load(len(latencies) / elapsed, p50 * 1000, p99 * 1000, cpu_ms=0.0, requests=len(latencies))


async def _post_callbacks(port: int, posts: list[tuple["SignedCallback", ...]]) -> Load:
    """POST every event's callbacks in order, CONCURRENCY events at a time."""
    latencies: list[float] = []
    queue = list(reversed(posts))

    async def client(session: aiohttp.ClientSession) -> None:
        while queue:
            for post in queue.pop():
                started = time.perf_counter()
                url = f"http://127.0.0.1:{port}{post.path}"
                async with session.post(
                    url, data=post.params, headers={"X-Twilio-Signature": post.signature}
                ) as answer:
                    await answer.read()
                    _check("callback", answer.status, await answer.text())
                latencies.append(time.perf_counter() - started)

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=CONCURRENCY)) as session:
        started = time.perf_counter()
        await asyncio.gather(*(client(session) for _ in range(CONCURRENCY)))
        elapsed = time.perf_counter() - started
    p50, p99, _ = spread(latencies)
    return Load(len(latencies) / elapsed, p50 * 1000, p99 * 1000, cpu_ms=0.0, requests=len(latencies))


@dataclass(frozen=True)
class SignedCallback:
    path: str
    params: dict[str, str]
    signature: str


def pending_sms_events(count: int, service: str) -> list[tuple[str, str]]:
    """``count`` new events of ``service`` whose SMS the provider accepted: (event id, message sid) each."""
    rng = random.Random("pending sms")
    now = current_clock().now()
    pending = []
    previous = logging.root.manager.disable
    logging.disable(max(previous, logging.INFO))  # a transition log line per event would bury the figures
    for number in range(count):
        reset = reset_request(service, CreateEvent.model_validate(creation_body(rng)))
        event = create_event(reset, now=now).event
        sid = f"SM{number:032d}"
        accepted = ObservationInput(Channel.SMS, Source.SUBMIT, Normalized.ACCEPTED, provider_ref=sid)
        record_receipt(event.id, accepted, now=now, actor="bench")
        pending.append((event.id, sid))
    logging.disable(previous)
    return pending


def signed_callback(event_id: str, sid: str, status: str) -> SignedCallback:
    """A status callback as Twilio posts it for ``event_id``, signed with the account's token."""
    params = {"MessageSid": sid, "MessageStatus": status, "AccountSid": settings.TWILIO_ACCOUNT_SID}
    url = sms_callback_url(event_id)
    signature = RequestValidator(settings.TWILIO_AUTH_TOKEN).compute_signature(url, params)
    return SignedCallback(urlsplit(url).path, params, signature)


def creation_body(rng: random.Random, *, region: str = "US", ttl_seconds: int = 600) -> dict[str, object]:
    """A valid ``POST /api/v1/events`` body with a fresh client key and fictional destinations."""
    return {
        "client_key": str(uuid.UUID(int=rng.getrandbits(128))),
        "purpose": "password_reset",
        "region": region,
        "phone": fictional_phone(rng, "US"),
        "email": f"bench.{rng.randrange(10**9)}@example.org",
        "reset_url": f"https://accounts.example.org/reset/{uuid.UUID(int=rng.getrandbits(128)).hex}",
        "ttl_seconds": ttl_seconds,
    }


def _forget_events() -> None:
    for model in (Observation, Transition, Claim, VaultEntry, Event):
        model.objects.all().delete()
