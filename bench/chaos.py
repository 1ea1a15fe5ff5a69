"""`make chaos`: events through real worker processes while faults are injected, then the invariants.

Several ``celery worker`` processes, ``celery beat``, a gunicorn web server taking the
provider's signed callbacks, and the provider simulator run on PostgreSQL and Redis. A
stream of events is fed in while a controller, on a schedule derived from the seed,
kills workers with SIGKILL (mid-lease, mid-call), restarts the broker once, terminates the
workers' PostgreSQL connections once, slows the SMTP relay at every reply now and then,
pauses every step worker once for longer than an event's action budget while the pager goes
through an outage (timeouts, 429, 5xx), poisons a few events once (a sealed entry no key opens,
a time zone the workers do not know: every step of theirs raises), and scripts provider faults
per message (timeouts
after acceptance, acceptances after the client's timeout, 5xx, rejections, callbacks dropped,
duplicated, reordered, delayed past the fallback; SMTP deferrals, refusals and connections
lost after DATA). One worker's clock runs 30 s ahead and another's 30 s behind; the provider
keeps no message body (ContentRetention=discard and body redaction), and in the RabbitMQ run
masks numbers too.

At the end ``notify.invariants`` reads the database and the simulator's counts,
``runbook.paging.invariants`` the pager stand-in's log (``bench.chaos_paging``); the logs and a sample
of console pages are searched for the personal data the events carried and the routing key.
A JSON summary goes to stdout and ``bench/results/chaos.json``; any violation fails the run.
"""

import argparse
import bisect
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bench import chaos_paging, processes
from bench.chaos_paging import Backlog
from config import lanes

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
DATABASE = "reset_delivery_chaos"
# The servers the run uses and breaks: the machine's by default; `make test` passes its own
# throwaway ones (deploy/test-services.sh).
POSTGRES = os.environ.get("CHAOS_POSTGRES", "postgres://postgres@127.0.0.1:5432")
REDIS = os.environ.get("CHAOS_REDIS", "redis://127.0.0.1:6379")
REDIS_PORT = urlsplit(REDIS).port or 6379
RABBITMQ_NODE = os.environ.get("CHAOS_RABBITMQ_NODE", "")  # "": rabbitmqctl's own default node
BROKERS = {"redis": f"{REDIS}/13", "rabbitmq": os.environ.get("CHAOS_AMQP", "amqp://guest:guest@127.0.0.1:5672//")}
LOGS = ROOT / "var" / "chaos"
REGION = "US"
# Reset lifetimes are drawn from this range (seconds).
LIFETIMES = (15.0, 25.0)
# Every step worker paused this long: longer than the whole action budget of the shortest-lived
# events (15 s of life less 1.4 s of steps), so the events created as it starts go at risk
# before it ends, and so does every event it catches in flight.
BACKLOG_SECONDS = 15.0
# The page delivery lane apart from the other lanes' worker, as in deploy/Procfile.demo: a pager
# outage holds its calls, never a sweep or an evaluation.
PAGES_LANE = "pages"
OTHER_LANES = ",".join(queue for queue in lanes.LANES if queue != PAGES_LANE)
# A broker restart or a connection reset this close before the backlog still holds the lanes
# up when it starts (their workers reconnect with a growing backoff: 2 s, 4 s, ...).
QUIET_BEFORE_BACKLOG = 10.0
# Plan entries that end a fault rather than inject one: not counted.
RECOVERIES = frozenset({"steps_resumed"})
# The simulator's late acceptances finish within this (scripted below), and the workers'
# processing horizon covers it: "not found" proves absence only past it.
LATE_ACCEPTANCE_SECONDS = 2.5
PROCESSING_HORIZON_SECONDS = 3
# Workers 0 and 1 play hosts whose clocks are this far off the database's.
CLOCK_OFFSETS = {0: 30.0, 1: -30.0}
# Events poisoned once, as created: each step of theirs raises (ways alternating). Contained,
# each backs off and takes no other event's turn meanwhile (a doubling from 0.5 s, at most 4 s:
# a dozen failed steps at most in a 25 s life), is paged as failing and expires on time, and the
# healthy events created in the POISON_WINDOW after it go at the run's own pace: no larger a
# share of them has its SMS tried after its fallback deadline than of those created in the
# POISON_WINDOW before it, give or take HELD_BACK_MARGIN (uncontained, the poisoned events took
# every turn and nearly all of them did). Worker kills are held off around both windows.
POISONED_EVENTS = 3
HELD_BACK_MARGIN = 0.5
# The sender of the run's policy (bench.database.seconds_scale_policy).
POLICY_SENDER = "+15005550006"
POISONS = ("sealed_entry", "time_zone")
POISON_WINDOW = 5.0
POISONED_STEPS_AT_MOST = 12

# Provider behaviours per message, with weights: mostly normal, every fault kind present.
# (weight, what the create calls do in turn, the final status and its delay, callbacks)
_SMS = {
    "delivered": (30, ["accept"], ("delivered", 0.6), "normal"),
    "callbacks_dropped": (8, ["accept"], ("delivered", 1.0), "drop"),
    "callbacks_duplicated": (8, ["accept"], ("delivered", 0.5), "duplicate"),
    "callbacks_reordered": (6, ["accept"], ("delivered", 0.4), "reorder"),
    "delivered_after_fallback": (6, ["accept"], ("delivered", 7.0), "delay"),
    "terminal_failure": (8, ["accept"], ("undelivered", 0.8), "normal"),
    "never_confirmed": (6, ["accept"], None, "normal"),
    "rejected": (5, ["reject"], None, "normal"),
    "server_error_then_accepted": (5, ["server_error", "accept"], ("delivered", 0.5), "normal"),
    "timeout_after_acceptance": (6, ["accept_then_drop", "accept"], ("delivered", 0.5), "normal"),
    "error_after_acceptance": (5, ["accept_then_500", "accept"], ("delivered", 0.5), "normal"),
    "provider_hangs": (3, ["hang", "accept"], ("delivered", 0.5), "normal"),
    # Twilio still processing when our client gives up; the message is listed seconds later.
    "accepted_after_timeout": (6, ["accept_late", "accept"], ("delivered", 0.5), "normal"),
}
SMS_PROFILES = {
    name: (
        weight,
        {
            "create": create,
            "statuses": [["sent", 0.2]] + ([[final[0], final[1]]] if final else []),
            "callbacks": callbacks,
            **({"hang_seconds": LATE_ACCEPTANCE_SECONDS} if "accept_late" in create else {}),
        },
    )
    for name, (weight, create, final, callbacks) in _SMS.items()
}
EMAIL_PROFILES = {
    "accepted": (70, ["accept"]),
    "deferred_then_accepted": (10, ["temp_fail", "accept"]),
    "refused": (5, ["perm_fail"]),
    "lost_after_data": (10, ["drop_after_data", "accept"]),
    "slow_relay": (5, ["hang", "accept"]),
}


@dataclass
class Run:
    seed: int
    events: int
    workers: int
    rate: float
    broker: str
    # Which worker dies when: its own stream, so the kills do not shift with the event mix.
    victims: random.Random = field(default_factory=random.Random)
    faults: Counter[str] = field(default_factory=Counter)
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    # Process groups stopped by the current step backlog, and every backlog's time span.
    paused: list[int] = field(default_factory=list)
    backlogs: list[Backlog] = field(default_factory=list)
    # Events still to poison as they are created, and those poisoned (event id: how).
    poison_next: int = 0
    poisoned: dict[str, str] = field(default_factory=dict)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--rate", type=float, default=20.0, help="events created per second")
    parser.add_argument("--broker", choices=sorted(BROKERS), default="redis", help="the Celery broker to run on")
    options = parser.parse_args(argv)
    run = Run(options.seed, options.events, options.workers, options.rate, options.broker)
    # Fresh logs: the personal-data search must read this run's output only.
    shutil.rmtree(LOGS, ignore_errors=True)
    LOGS.mkdir(parents=True)
    web_port = processes.free_port()
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DATABASE_URL": f"{POSTGRES}/{DATABASE}",
            "CELERY_BROKER_URL": BROKERS[run.broker],
            "PUBLIC_BASE_URL": f"http://127.0.0.1:{web_port}",
            "DJANGO_HTTPS": "false",
            "NOTIFY_SWEEP_INTERVAL": "0.5",
            "NOTIFY_SWEEP_REDELIVER_AFTER": "2",
            "NOTIFY_SMS_LOOKUP_DELAY": "0.2",
            "TWILIO_TIMEOUT": "1",
            "TWILIO_PROCESSING_HORIZON": str(PROCESSING_HORIZON_SECONDS),
            # The RabbitMQ run's account masks numbers: lookups there can find, never disprove.
            "TWILIO_PHONE_REDACTION": "1" if run.broker == "rabbitmq" else "0",
            # The simulator's numbers are ours alone: a lookup may take an unread message from
            # our sender for ours though the provider keeps no body (not with masked numbers).
            "TWILIO_EXCLUSIVE_SENDERS": POLICY_SENDER,
            "EMAIL_TIMEOUT": "1",
            # The margin on a seconds scale, as the policy: a lease held 5 s past a 4 s send,
            # so a killed sender's email is taken over while the link still has life.
            "NOTIFY_LEASE_MARGIN": "1",
            "NOTIFY_STEP_BACKOFF": "0.5",
            "NOTIFY_STEP_BACKOFF_MAX": "4",
            "LOG_FORMAT": "json",
        }
    )
    _prepare_database()
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    # As a deploy does (docs/operations.md): the console pages the verdict renders link the
    # static files by their hashed names.
    call_command("collectstatic", "--no-input", verbosity=0)
    from simulator.process import start_simulator

    simulator = start_simulator(LOGS / "simulator.log", "--seed", str(run.seed))
    simulator.control.wait_until_up(30)
    os.environ.update(
        {
            "TWILIO_API_BASE": simulator.base_url,
            "EMAIL_HOST": "127.0.0.1",
            "EMAIL_PORT": str(simulator.smtp_port),
            "EMAIL_USE_TLS": "0",
            **chaos_paging.environment(simulator.base_url, REGION),
        }
    )
    from django.conf import settings

    settings.TWILIO_API_BASE = simulator.base_url  # this process's settings were read before the simulator ran
    try:
        summary = _chaos(run, simulator, web_port)
    finally:
        _resume_steps(run)  # a stopped process would sit on its SIGTERM
        for process in run.processes:
            _stop(process)
        simulator.stop()
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / ("chaos.json" if run.broker == "redis" else f"chaos-{run.broker}.json")).write_text(
        json.dumps(summary, indent=2) + "\n"
    )
    print(json.dumps(summary, indent=2))
    return 1 if summary["violations"] else 0


def _prepare_database() -> None:
    import psycopg

    with psycopg.connect(f"{POSTGRES}/postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{DATABASE}"')


def _chaos(run: Run, simulator, web_port: int) -> dict[str, object]:
    from notify.intake import ResetRequest
    from notify.writes import wake_ups
    from notify.writes.create import create_event
    from plumbing.clock import current_clock
    from tests.factories import CANARY_EMAIL, CANARY_PHONE, CANARY_RESET_URL

    _empty_broker(run.broker)
    from bench.database import seconds_scale_policy

    # An SMS budget past the processing horizon, so absence can be proven before D; the
    # provider keeps no body, so every lookup goes by sender and time. Events at risk page.
    policy = seconds_scale_policy(
        REGION,
        sms_budget=timedelta(seconds=6),
        sms_discard_content=True,
        alert_mode="page",
        page_margin=chaos_paging.PAGE_MARGIN,
        # Every at-risk event pages on its own here: the run's paging block judges single pages.
        surge_threshold=1_000_000,
    )
    simulator.control.redact(body=True, phone=run.broker == "rabbitmq")
    run.faults["sms_body_redaction"] += 1
    run.faults["sms_phone_redaction"] += run.broker == "rabbitmq"
    run.processes.append(_spawn("web", ["gunicorn", "config.wsgi", "-b", f"127.0.0.1:{web_port}", "-w", "2"]))
    workers = [_worker(index) for index in range(run.workers)]
    # The sweeper, evaluation and housekeeping on their lanes, page delivery on its own (never
    # a kill victim, never paused).
    lane_workers = [_worker("lanes", queues=OTHER_LANES), _worker(PAGES_LANE, queues=PAGES_LANE)]
    # Every process is stopped at the end, a worker that was never killed too: one left running
    # would take the next run's wake-ups with this run's provider addresses.
    run.processes += [worker["process"] for worker in [*workers, *lane_workers]]  # type: ignore[misc]
    for index in range(min(run.workers, len(CLOCK_OFFSETS))):
        run.faults[f"worker_clock_{CLOCK_OFFSETS[index]:+.0f}s"] += 1
    run.processes.append(_spawn("beat", ["celery", "-A", "config", "beat", "--schedule", str(LOGS / "beat.db")]))
    rng = random.Random(run.seed)
    run.victims = random.Random(run.seed + 1)
    plan = _fault_plan(rng, run)
    sms_names = list(SMS_PROFILES)
    email_names = list(EMAIL_PROFILES)
    created: list[str] = []
    started = time.monotonic()
    for number in range(run.events):
        sms_profile = rng.choices(sms_names, [SMS_PROFILES[name][0] for name in sms_names])[0]
        email_profile = rng.choices(email_names, [EMAIL_PROFILES[name][0] for name in email_names])[0]
        run.faults[f"sms:{sms_profile}"] += 1
        run.faults[f"email:{email_profile}"] += 1
        phone = CANARY_PHONE if number == 0 else f"+1415556{number % 10000:04d}"
        email = CANARY_EMAIL if number == 0 else f"chaos.{number}@example.org"
        simulator.control.script_sms(phone, **SMS_PROFILES[sms_profile][1])
        simulator.control.script_email(email, smtp=EMAIL_PROFILES[email_profile][1])
        request = ResetRequest(
            service="chaos", client_key=f"chaos-{run.seed}-{number}", region=policy.region, purpose="password_reset",
            phone=phone, email=email, reset_url=CANARY_RESET_URL, ttl=timedelta(seconds=rng.uniform(*LIFETIMES)),
        )  # fmt: skip
        if run.poison_next:
            event = _poisoned(request, POISONS[run.poison_next % len(POISONS)], run)
        else:
            event = create_event(request, now=current_clock().now()).event
        wake_ups.publish(event.id)
        created.append(event.id)
        _supervise(run, lane_workers)
        _inject_due(plan, run, workers, started, simulator)
        time.sleep(max(0.0, started + (number + 1) / run.rate - time.monotonic()))
    # Keep the faults coming until the schedule is done, then let everything settle: the events,
    # then the pages they opened (the outbox keeps under the pager's rate limit, so a few
    # hundred messages take minutes).
    while plan:
        _supervise(run, lane_workers)
        _inject_due(plan, run, workers, started, simulator)
        time.sleep(0.2)

    def supervise() -> None:
        _supervise(run, [*workers, *lane_workers])

    _settle(lambda: _ended(created), deadline=time.monotonic() + 90, supervise=supervise)
    from runbook.paging.invariants import outbox_drained

    _settle(outbox_drained, deadline=time.monotonic() + 300, supervise=supervise)
    return _verdict(run, simulator, created)


def _poisoned(request, how: str, run: Run):
    """Create an event that no step can advance: its sealed entry opens with no key, or its time
    zone is unknown to the workers (as after a version skew); poisoned before any step sees it."""
    from django.db import transaction

    from notify.models import Event, VaultEntry
    from notify.writes.create import create_event
    from plumbing.clock import current_clock

    with transaction.atomic():
        event = create_event(request, now=current_clock().now()).event
        if how == "sealed_entry":
            VaultEntry.objects.filter(event_id=event.id).update(ciphertext=b"sealed with a key no worker has")
        else:
            Event.objects.filter(pk=event.id).update(time_zone="Mars/Olympus_Mons")
    run.poison_next -= 1
    run.poisoned[event.id] = how
    return event


def _spawn(name: str, command: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    log = (LOGS / f"{name}.log").open("ab")
    binary = Path(sys.executable).parent / command[0]
    return subprocess.Popen(
        [str(binary), *command[1:]], cwd=ROOT, stdout=log, stderr=log, start_new_session=True,
        env=os.environ | (env or {}),
    )  # fmt: skip


def _worker(index: int | str, *, queues: str = lanes.STEP_QUEUE) -> dict[str, object]:
    command = [
        "celery", "-A", "config", "worker", "-Q", queues, "--loglevel", "INFO", "--pool", "threads",
        "--concurrency", "2", "--without-heartbeat", "--without-gossip", "--without-mingle",
        "--hostname", f"chaos{index}@%h",
    ]  # fmt: skip
    # Each worker is a host of its own for the clock report; two of them with clocks 30 s off.
    offset = CLOCK_OFFSETS.get(index, 0.0) if isinstance(index, int) else 0.0
    env = {"NOTIFY_HOST_NAME": f"chaos-worker-{index}", "NOTIFY_CLOCK_OFFSET": str(offset)}
    return {"index": index, "command": command, "env": env, "process": _spawn(f"worker-{index}", command, env)}


def _empty_broker(broker: str) -> None:
    """Start without wake-ups left over from an earlier run."""
    if broker == "redis":
        import redis

        redis.Redis.from_url(BROKERS["redis"]).flushdb()
    else:
        subprocess.run(_rabbitmqctl("purge_queue", "celery"), capture_output=True, check=False)


def _rabbitmqctl(*args: str) -> list[str]:
    return ["rabbitmqctl", *(["-n", RABBITMQ_NODE] if RABBITMQ_NODE else []), *args]


def _restart_broker(broker: str) -> None:
    """Stop the broker (queued wake-ups are lost) and start it again."""
    if broker == "redis":
        port = str(REDIS_PORT)
        subprocess.run(["redis-cli", "-p", port, "shutdown", "nosave"], capture_output=True, check=False)
        time.sleep(2.0)
        subprocess.run(
            ["redis-server", "--daemonize", "yes", "--bind", "127.0.0.1", "--port", port, "--save", "",
             "--appendonly", "no"],
            capture_output=True, check=True,
        )  # fmt: skip
        ready = ["redis-cli", "-p", port, "ping"]
    else:
        subprocess.run(_rabbitmqctl("stop_app"), capture_output=True, check=False)
        subprocess.run(_rabbitmqctl("purge_queue", "celery"), capture_output=True, check=False)
        time.sleep(2.0)
        subprocess.run(_rabbitmqctl("start_app"), capture_output=True, check=True)
        ready = _rabbitmqctl("await_startup")
    for _ in range(50):
        if subprocess.run(ready, capture_output=True).returncode == 0:
            break
        time.sleep(0.1)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _fault_plan(rng: random.Random, run: Run) -> list[tuple[float, str]]:
    """(seconds after the start, fault): kills every few seconds, one broker restart, one DB reset,
    one step backlog with a pager outage at its end."""
    feeding = run.events / run.rate
    plan: list[tuple[float, str]] = []
    at = rng.uniform(2, 4)
    while at < feeding + 10:
        plan.append((at, "kill_worker"))
        at += rng.uniform(3, 6)
    # While events are still being created, late enough that some are in flight, and late
    # enough that most of the run's events meet the provider faults first: every event
    # created while the steps are paused spends its budget waiting and falls back or expires.
    backlog = max(5.0, feeding * rng.uniform(0.55, 0.7))
    plan.append((backlog, "step_backlog"))
    plan.append((backlog + BACKLOG_SECONDS, "steps_resumed"))
    outage = backlog + BACKLOG_SECONDS - chaos_paging.OUTAGE_BEFORE_BACKLOG_ENDS
    plan.append((outage, "pager_outage"))
    # The broker restart and the connection reset each stop the lanes too (a lane worker may
    # even die of it and be restarted): kept clear of the backlog and the outage, whose page
    # lateness and pager traffic they would blur, they come after them if drawn inside.
    quiet_until = outage + chaos_paging.OUTAGE_SECONDS
    for fault, (low, high), after in [("restart_broker", (0.3, 0.5), 1), ("reset_database_connections", (0.6, 0.8), 5)]:
        at = feeding * rng.uniform(low, high)
        plan.append((quiet_until + after if backlog - QUIET_BEFORE_BACKLOG <= at <= quiet_until + 2 else at, fault))
    # Early, before the broker restart and the backlog; no worker is killed from just before it
    # until the healthy events created in its window are past their fallback deadline (a kill
    # delays the step it interrupts by a lease, which the poison must not be blamed for).
    poison = max(3.0, feeding * 0.1)
    plan.append((poison, "poison_events"))
    calm = (poison - POISON_WINDOW - 7.0, poison + POISON_WINDOW + 7.0)
    plan = [(at, fault) if fault != "kill_worker" or not calm[0] <= at <= calm[1] else (calm[1], fault)
            for at, fault in plan]  # fmt: skip
    # A relay slower than the lease, every reply inside the read timeout: now and then, for the
    # next few connections (whichever emails they carry).
    at = rng.uniform(1, 5)
    while at < feeding:
        plan.append((at, "slow_smtp_relay"))
        at += rng.uniform(8, 16)
    return sorted(plan)


def _inject_due(
    plan: list[tuple[float, str]], run: Run, workers: list[dict[str, object]], started: float, simulator
) -> None:
    _supervise(run, workers)
    while plan and plan[0][0] <= time.monotonic() - started:
        _, fault = plan.pop(0)
        if fault == "kill_worker" and run.paused:
            # Every step worker is paused: none is killed meanwhile (a stopped one, killed and
            # restarted, would end the backlog early). The kill comes once they are resumed.
            resumed = next(at for at, planned in plan if planned == "steps_resumed")
            bisect.insort(plan, (resumed + 0.5, fault))
            continue
        if fault not in RECOVERIES:
            run.faults[fault] += 1
        if fault == "kill_worker":
            victim = run.victims.choice(workers)
            process = victim["process"]
            assert isinstance(process, subprocess.Popen)
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            time.sleep(1.0)  # the pause: its leases run out meanwhile
            victim["process"] = _spawn(f"worker-{victim['index']}", victim["command"], victim["env"])  # type: ignore[arg-type]
            run.processes.append(victim["process"])  # type: ignore[arg-type]
        elif fault == "restart_broker":
            _restart_broker(run.broker)
        elif fault == "slow_smtp_relay":
            # 0.9 s before each reply, under the 1 s read timeout: about 8 s an exchange, well
            # past the lease, were it not for the send's own deadline (4 s here).
            simulator.control.pace_smtp(connections=3, reply_delay=0.9)
        elif fault == "reset_database_connections":
            from django.db import connection

            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE datname = %s AND pid <> pg_backend_pid()",
                    [DATABASE],
                )
        elif fault == "step_backlog":
            _pause_steps(run, workers)
        elif fault == "steps_resumed":
            _resume_steps(run)
        elif fault == "pager_outage":
            simulator.control.pager_outage(chaos_paging.OUTAGE_PHASES)
        elif fault == "poison_events":
            run.poison_next = POISONED_EVENTS


def _pause_steps(run: Run, workers: list[dict[str, object]]) -> None:
    """Stop every step worker, pool and all: their queue backs up while the lanes go on.

    Leases they hold run out meanwhile and their broker connections stay open (no AMQP
    heartbeat is missed in seconds; Redis has none): resumed, each finds its step fenced
    or still its own, as after a long garbage-collection pause.
    """
    from plumbing.clock import current_clock

    for worker in workers:
        process = worker["process"]
        assert isinstance(process, subprocess.Popen)
        os.killpg(process.pid, signal.SIGSTOP)
        run.paused.append(process.pid)
    run.backlogs.append(Backlog(current_clock().now()))


def _resume_steps(run: Run) -> None:
    from plumbing.clock import current_clock

    for pid in run.paused:
        with contextlib.suppress(ProcessLookupError):  # gone meanwhile
            os.killpg(pid, signal.SIGCONT)
    if run.paused:
        run.backlogs[-1].ended = current_clock().now()
    run.paused.clear()


def _settle(done: Callable[[], bool], *, deadline: float, supervise: Callable[[], None]) -> None:
    """Wait until ``done()`` or the deadline, keeping the workers supervised."""
    while time.monotonic() < deadline:
        if done():
            return
        supervise()
        time.sleep(1.0)


def _ended(created: list[str]) -> bool:
    from notify.models import Event

    return not Event.objects.filter(pk__in=created, act_by__isnull=False).exists()


def _supervise(run: Run, workers: list[dict[str, object]]) -> None:
    """Restart a worker that exited on its own, as a process supervisor in production would.

    Not a fault of ours: kombu's Redis transport can die while restoring unacknowledged
    messages after the broker went away (``AttributeError: 'NoneType' object has no attribute
    'hostname'`` in ``_connparams``). Counted, so the summary shows how often.
    """
    for worker in workers:
        process = worker["process"]
        assert isinstance(process, subprocess.Popen)
        if process.poll() is not None:
            run.faults["worker_exited_and_restarted"] += 1
            worker["process"] = _spawn(f"worker-{worker['index']}", worker["command"], worker["env"])  # type: ignore[arg-type]
            run.processes.append(worker["process"])  # type: ignore[arg-type]


def _verdict(run: Run, simulator, created: list[str]) -> dict[str, object]:
    from django.test import Client

    from notify import invariants, tallies
    from notify.models import Claim, Event, HostClock, Observation
    from plumbing.clock import current_clock
    from tests.factories import CANARY_EMAIL, CANARY_PHONE, CANARY_RESET_URL

    counts = simulator.control.counts()
    provider = invariants.ProviderCounts(sms=counts["sms"], email=counts["email"])
    found = invariants.check(now=current_clock().now(), grace=timedelta(seconds=10), provider=provider)
    kinds = Counter(violation.kind for violation in found)
    claimed = dict(Claim.objects.filter(event_id__in=created, channel="email").values_list("event_id", "created_at"))
    late = {
        event_id
        for event_id, at in Observation.objects.filter(
            event_id__in=claimed, channel="sms", normalized="delivered"
        ).values_list("event_id", "recorded_at")
        if at > claimed[event_id]
    }
    secrets = {
        "personal_data": (CANARY_PHONE, CANARY_EMAIL, CANARY_RESET_URL),
        "routing_key": (chaos_paging.ROUTING_KEY,),
    }
    leaks = _secrets_in_outputs(created, secrets, Client)
    paging, paging_violations = chaos_paging.verdict(created, simulator.control.pager_log(), run.backlogs)
    poisoned, poison_violations = _poison_verdict(run, created, simulator.control.pager_log())
    violations = [violation.__dict__ for violation in invariants.failures(found)] + paging_violations + leaks
    violations += poison_violations
    return {
        "events": len(created),
        "states": dict(Counter(Event.objects.filter(pk__in=created).values_list("state", flat=True))),
        # Injected process faults, and the provider faults the events actually met (a scripted
        # email fault, say, matters only to an event that fell back).
        "faults": dict(sorted((_injected(run) + _exercised(created, counts)).items())),
        "scripted": dict(sorted((run.faults - _injected(run)).items())),
        "duplicates": kinds["duplicate_sms"] + kinds["unexplained_email"],
        # Emails sent again after their worker was lost mid-send: SMTP cannot tell whether the
        # relay took the first, so these may be real second copies (same Message-ID).
        "possible_duplicates": kinds["possible_duplicate_email"],
        "lost": kinds["open_after_expiry"],
        "late_fallbacks": len(late),
        # SMS whose submit stayed unsettled past D and that turned up after the email was claimed.
        "late_sms_acceptances": _tally(tallies.LATE_SMS_ACCEPTANCES),
        "fallbacks_without_useful_life": _tally(tallies.FALLBACKS_WITHOUT_USEFUL_LIFE),
        # Each worker host's largest offset from the database's clock in its last report.
        "host_clock_offsets": dict(HostClock.objects.order_by("host").values_list("host", "offset_seconds")),
        "paging": paging,
        "poisoned": poisoned,
        "broker": run.broker,
        "violations": violations,
    }


def _poison_verdict(run: Run, created: list[str], log) -> tuple[dict[str, object], list[dict[str, str]]]:
    """The summary's ``poisoned`` block, and its violations: a poisoned event not paged as failing,
    one that took more turns than its backoff allows, healthy events held back while they failed."""
    from notify.models import Event

    poisoned = {event.id: event for event in Event.objects.filter(pk__in=run.poisoned)}
    triggered = {entry["dedup_key"] for entry in log if entry["action"] == "trigger" and entry["outcome"] == "accepted"}
    failing_pages = set(Event.objects.filter(pk__in=poisoned, page__reason="step_failing").values_list("pk", flat=True))
    failed = _failed_steps()
    violations = []
    for event_id in poisoned:
        if event_id not in failing_pages or event_id not in triggered:
            violations.append({"kind": "poisoned_not_paged", "event_id": event_id, "detail": run.poisoned[event_id]})
        if failed[event_id] > POISONED_STEPS_AT_MOST:
            detail = f"{failed[event_id]} failed steps (bound {POISONED_STEPS_AT_MOST}): it took others' turns"
            violations.append({"kind": "poisoned_took_turns", "event_id": event_id, "detail": detail})
    first = min((event.created_at for event in poisoned.values()), default=None)
    before, after = _late_share(created, poisoned, first, -POISON_WINDOW), _late_share(created, poisoned, first, 0.0)
    if (
        after["events"]
        and after["late"] / after["events"] > before["late"] / max(before["events"], 1) + HELD_BACK_MARGIN
    ):
        detail = (
            f"{after['late']} of {after['events']} created after the poisoning missed D,"
            f" {before['late']} of {before['events']} before it"
        )
        violations.append({"kind": "healthy_events_held_back", "event_id": "", "detail": detail})
    failures = sum(failed[event_id] for event_id in poisoned)
    block = {
        "events": len(poisoned),
        "how": dict(Counter(run.poisoned.values())),
        "paged_as_failing": len(failing_pages & triggered),
        "states": dict(Counter(event.state for event in poisoned.values())),
        "failed_steps": failures,
        # Steps of other events that raised: none is expected; each is a bug the run found.
        "failed_steps_of_healthy_events": sum(failed.values()) - failures,
        # Healthy events created in the 5 s before and after the poisoning, and how many of each
        # had their SMS tried only after their fallback deadline D.
        "healthy_before": before,
        "healthy_after": after,
    }
    if not poisoned:
        violations.append({"kind": "poison_unmet", "event_id": "", "detail": "no event was poisoned"})
    return block, violations


def _failed_steps() -> Counter[str]:
    """The worker steps that raised, by event, from the workers' logs (a count on the event is
    only its failures in a row: a step that completes sets it back)."""
    failed: Counter[str] = Counter()
    for log in LOGS.glob("worker-*.log"):
        for line in log.read_text(errors="replace").splitlines():
            if '"step_failed"' in line:
                with contextlib.suppress(ValueError):
                    failed[json.loads(line)["event_id"]] += 1
    return failed


def _late_share(created: list[str], poisoned: dict[str, Any], first: Any, offset: float) -> dict[str, int]:
    """Of the healthy events created in the POISON_WINDOW from ``offset`` seconds after the first
    poisoned one, how many there were and how many had their SMS tried only after D."""
    from notify.models import Claim, Event
    from notify.rules import machine

    if first is None:
        return {"events": 0, "late": 0}
    start = first + timedelta(seconds=offset)
    window = Event.objects.filter(
        pk__in=created, created_at__gte=start, created_at__lt=start + timedelta(seconds=POISON_WINDOW)
    ).exclude(pk__in=poisoned)
    tried = dict(Claim.objects.filter(event__in=window, channel="sms").values_list("event_id", "submitted_at"))
    late = sum(
        (at := tried.get(event.id)) is None or at > machine.fallback_deadline(event, event.policy)
        for event in window.select_related("policy")
    )
    return {"events": len(window), "late": late}


def _tally(name: str) -> int:
    from notify.models import Tally

    return int(sum(Tally.objects.filter(name=name).values_list("value", flat=True)))


def _injected(run: Run) -> Counter[str]:
    return Counter({kind: n for kind, n in run.faults.items() if ":" not in kind})


def _exercised(created: list[str], counts) -> Counter[str]:
    """The provider faults recorded as what they are: evidence in the history, the simulator's tallies."""
    from django.db.models import Count

    from notify.models import Observation

    met: Counter[str] = Counter()
    recorded = (
        Observation.objects.filter(event_id__in=created)
        .exclude(normalized__in=["accepted", "pending", "delivered", "note"])
        .values_list("channel", "source", "normalized")
        .annotate(n=Count("*"))
    )
    for channel, source, normalized, n in recorded:
        met[f"{channel}:{source}:{normalized}"] += n
    met["sms:callbacks_sent"] = counts.get("callbacks_sent", 0)
    met["sms:rejected_by_provider"] = counts.get("sms_rejected", 0)
    met["email:refused_by_relay"] = counts.get("email_rejected", 0)
    met["sms:accepted_after_client_timeout"] = counts.get("sms_accepted_late", 0)
    met["email:slow_relay_connections"] = counts.get("smtp_paced_connections", 0)
    return met


def _secrets_in_outputs(created: list[str], secrets: dict[str, tuple[str, ...]], client_class) -> list[dict[str, str]]:
    """Each process log and console page that shows one of ``secrets`` (by kind: what was leaked)."""
    from django.contrib.auth.models import User

    admin, _ = User.objects.get_or_create(username="chaos", defaults={"is_superuser": True, "is_staff": True})
    client = client_class(HTTP_HOST="localhost")
    client.force_login(admin)
    pages = ["/", "/pages", "/follow-ups", *(f"/events/{event_id}" for event_id in created[:50])]
    outputs = [(log.name, log.read_text(errors="replace")) for log in sorted(LOGS.glob("*.log"))]
    outputs += [(page, client.get(page).content.decode(errors="replace")) for page in pages]
    return [
        {"kind": kind, "event_id": "", "detail": name}
        for name, text in outputs
        for kind, values in secrets.items()
        for value in values
        if value in text
    ]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
