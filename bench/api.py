"""api_creations_per_s: event creations per second through the HTTP API, in production dress.

gunicorn (not the dev server) serves the project on PostgreSQL, with wake-ups going
to Redis; an asyncio client on loopback keeps ``CONCURRENCY`` requests in flight.
The ceiling is the same server, token check and rate limiter answering
``GET /api/v1/whoami``, which does no work of its own: what the framework allows.
Rounds alternate the order of the two and the median-ratio round is reported.
"""

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, replace
from pathlib import Path

import aiohttp
import redis
from django.core.management import call_command

from bench import processes
from bench.stats import spread
from notify.clock import current_clock
from notify.models import Claim, Event, Observation, ServiceToken, Transition, VaultEntry
from simulator.fictional import fictional_phone

ROOT = Path(__file__).resolve().parent.parent
BROKER = "redis://127.0.0.1:6379/14"
CONCURRENCY = 16
SECONDS = 8.0
ROUNDS = 3
GUNICORN = ["--workers", "4", "--worker-class", "gthread", "--threads", "4", "--backlog", "512"]


@dataclass(frozen=True)
class Load:
    rate: float
    p50_ms: float
    p99_ms: float
    cpu_ms: float  # the server's CPU per request (all gunicorn processes, from /proc)
    requests: int = 0


@dataclass(frozen=True)
class Figures:
    create: Load
    ceiling: Load


def run() -> Figures:
    call_command("load_policies", verbosity=0)
    token = ServiceToken.issue("bench", now=current_clock().now())[1]
    port = processes.free_port()
    server = _start_gunicorn(port)
    try:
        rounds = []
        for number in range(ROUNDS):
            _forget_events()
            order = ("create", "ceiling") if number % 2 == 0 else ("ceiling", "create")
            loads = {name: _measured(name, port, token, server.pid) for name in order}
            print(
                f"  round {number + 1}: create {loads['create'].rate:.0f}/s "
                f"(p50 {loads['create'].p50_ms:.1f} ms, p99 {loads['create'].p99_ms:.1f} ms, "
                f"{loads['create'].cpu_ms:.1f} ms web CPU), whoami {loads['ceiling'].rate:.0f}/s "
                f"(p99 {loads['ceiling'].p99_ms:.1f} ms, {loads['ceiling'].cpu_ms:.1f} ms web CPU)"
            )
            rounds.append((loads["create"].rate / loads["ceiling"].rate, loads))
        _, median = sorted(rounds, key=lambda pair: pair[0])[len(rounds) // 2]
        return Figures(median["create"], median["ceiling"])
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
    before = processes.cpu_seconds(server)
    load = asyncio.run(_drive(name, port, token))
    return replace(load, cpu_ms=(processes.cpu_seconds(server) - before) * 1000 / max(load.requests, 1))


async def _drive(name: str, port: int, token: str) -> Load:
    """Keep CONCURRENCY requests in flight for SECONDS; return the rate and latencies of the 2xx ones."""
    base = f"http://127.0.0.1:{port}/api/v1"
    headers = {"Authorization": f"Bearer {token}"}
    latencies: list[float] = []
    rng = random.Random(name)
    stop_at = time.monotonic() + SECONDS

    async def client(session: aiohttp.ClientSession) -> None:
        while time.monotonic() < stop_at:
            started = time.perf_counter()
            if name == "create":
                request = session.post(f"{base}/events", json=creation_body(rng), headers=headers)
            else:
                request = session.get(f"{base}/whoami", headers=headers)
            async with request as response:
                await response.read()
                if response.status >= 300:
                    raise SystemExit(f"{name}: unexpected {response.status}: {await response.text()}")
            latencies.append(time.perf_counter() - started)

    connector = aiohttp.TCPConnector(limit=CONCURRENCY)
    async with aiohttp.ClientSession(connector=connector) as session:
        started = time.monotonic()
        await asyncio.gather(*(client(session) for _ in range(CONCURRENCY)))
        elapsed = time.monotonic() - started
    p50, p99, _ = spread(latencies)
    return Load(len(latencies) / elapsed, p50 * 1000, p99 * 1000, cpu_ms=0.0, requests=len(latencies))


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
