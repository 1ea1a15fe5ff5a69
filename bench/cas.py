"""cas_transitions_per_s: transitions applied per second by 8 concurrent workers.

Side by side on the same PostgreSQL database: the project's own
``record_observation`` (load, decide, compare-and-set, observation, transition,
claim) in 8 processes, each taking events through two transitions (the SMS
accepted, then delivered; the second starts from the event the first returned),
against pgbench running the equivalent raw SQL
transaction (``bench/cas_raw.sql``) with 8 clients. Each round measures both,
in alternating order, on freshly seeded tables; the round with the median ratio
is reported, so a noisy moment on the machine skews neither side alone.
"""

import gc
import multiprocessing
import os
import re
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.db import connection, connections

from bench import database
from notify.models import Claim, Event, claim_key
from notify.rules.plan import ObservationInput
from notify.rules.vocabulary import Channel, ClaimState, NextAction, Normalized, Source, State
from notify.writes.moves import record_observation
from policies.models import PolicyVersion

WORKERS = 8
ROUND_SECONDS = 10.0
ROUNDS = 5
EVENTS_PER_WORKER = 6000
PGBENCH_EVENTS_PER_CLIENT = 6000
RAW_SQL = Path(__file__).resolve().parent / "cas_raw.sql"

ACCEPTED = ObservationInput(Channel.SMS, Source.CALLBACK, Normalized.ACCEPTED, raw_status="sent")
DELIVERED = ObservationInput(Channel.SMS, Source.CALLBACK, Normalized.DELIVERED, raw_status="delivered")


def run() -> tuple[float, float]:
    """Return (project transitions/s, raw SQL transitions/s) from the median round."""
    rounds = []
    for round_number in range(ROUNDS):
        policy = database.reset_tables()
        batches = _seed_project_events(policy, round_number)
        _seed_pgbench_events(policy)
        if round_number % 2 == 0:
            raw = _pgbench_rate()
            project = _project_rate(batches)
        else:
            project = _project_rate(batches)
            raw = _pgbench_rate()
        print(f"  round {round_number + 1}: project {project:.0f}/s, raw SQL {raw:.0f}/s")
        rounds.append((project / raw, project, raw))
    _, project, raw = sorted(rounds)[len(rounds) // 2]
    return project, raw


def _bench_event(event_id: str, policy: PolicyVersion, state: State, now: datetime) -> Event:
    return Event(
        id=event_id,
        service="bench",
        client_key=event_id,
        request_fingerprint="",
        purpose="password_reset",
        region=policy.region,
        policy=policy,
        fallback_available=True,
        sms_recipient_ref="",
        created_at=now,
        expires_at=now + timedelta(hours=1),
        state=state,
        version=1,
        state_entered_at=now,
        next_action=NextAction.RECOVER_SMS,
        next_action_at=now,
        act_by=now + timedelta(minutes=50),
    )


def _seed_project_events(policy: PolicyVersion, round_number: int) -> list[list[str]]:
    """Events whose SMS submit is in flight, so each takes two real transitions (accepted, delivered)."""
    now = datetime.now(UTC)
    batches = [[f"evt_bench_{round_number}_{w}_{i}" for i in range(EVENTS_PER_WORKER)] for w in range(WORKERS)]
    ids = [event_id for batch in batches for event_id in batch]
    Event.objects.bulk_create([_bench_event(event_id, policy, State.SMS_REQUESTED, now) for event_id in ids], 2000)
    Claim.objects.bulk_create(
        [
            Claim(
                event_id=event_id,
                channel=Channel.SMS,
                key=claim_key(Channel.SMS, event_id),
                state=ClaimState.SUBMITTING,
                attempts=1,
                submitted_at=now,
                created_at=now,
                updated_at=now,
            )
            for event_id in ids
        ],
        2000,
    )
    return batches


def _seed_pgbench_events(policy: PolicyVersion) -> None:
    now = datetime.now(UTC)
    rows = [
        _bench_event(f"evt_pgbench_{n}", policy, State.SMS_PENDING, now)
        for n in range(1, PGBENCH_EVENTS_PER_CLIENT * WORKERS + 1)
    ]
    Event.objects.bulk_create(rows, 5000)
    with connection.cursor() as cursor:
        # Settle the freshly seeded tables, so autovacuum does not wake up mid-measurement.
        for table in ("notify_event", "notify_claim", "notify_observation", "notify_transition"):
            cursor.execute(f"VACUUM ANALYZE {table}")


def _checkpoint() -> None:
    """Start each measurement right after a checkpoint: both sides then pay the same
    full-page images in the WAL for the first write to each page."""
    with connection.cursor() as cursor:
        cursor.execute("CHECKPOINT")


def _pgbench_rate() -> float:
    _checkpoint()
    db = settings.DATABASES["default"]
    command = [
        "pgbench",
        "--no-vacuum",
        f"--client={WORKERS}",
        "--jobs=2",
        f"--time={int(ROUND_SECONDS)}",
        f"--file={RAW_SQL}",
        f"--define=per_client={PGBENCH_EVENTS_PER_CLIENT}",
        f"--host={db['HOST']}",
        f"--port={db['PORT']}",
        f"--username={db['USER']}",
        db["NAME"],
    ]
    env = {**os.environ, "PGPASSWORD": db.get("PASSWORD") or ""}
    output = subprocess.run(command, capture_output=True, text=True, check=True, env=env).stdout
    match = re.search(r"tps = ([\d.]+) \(without initial connection time\)", output)
    if match is None:
        raise RuntimeError(f"pgbench printed no tps:\n{output}")
    return float(match.group(1))


def _project_rate(batches: list[list[str]]) -> float:
    _checkpoint()
    connections.close_all()  # each forked worker opens its own connection
    # Keep the children's garbage collector off the parent's objects (the seeded rows):
    # otherwise its first full collection copies every inherited page, at a random moment.
    gc.collect()
    gc.freeze()
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(WORKERS)
    results = context.Queue()
    processes = [context.Process(target=_worker, args=(batch, barrier, results)) for batch in batches]
    for process in processes:
        process.start()
    spans = [results.get(timeout=ROUND_SECONDS * 10) for _ in processes]
    for process in processes:
        process.join()
    gc.unfreeze()
    start = min(span[0] for span in spans)
    end = max(span[1] for span in spans)
    return float(sum(span[2] for span in spans) / (end - start))


def _worker(event_ids: list[str], barrier, results) -> None:
    Event.objects.exists()  # connect before the clock starts, as pgbench does
    barrier.wait()
    start = time.monotonic()
    stop = start + ROUND_SECONDS
    transitions = 0
    for event_id in event_ids:
        if time.monotonic() >= stop:
            break
        # As a worker records the outcome of its own action: the second write starts
        # from the event as the first one left it, the first reads it.
        known = None
        for observation in (ACCEPTED, DELIVERED):
            outcome = record_observation(event_id, observation, now=datetime.now(UTC), actor="bench", known=known)
            transitions += outcome.applied
            known = outcome.after
    results.put((start, time.monotonic(), transitions))
    connections.close_all()
