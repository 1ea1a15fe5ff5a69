"""Events flow end to end through real processes: Celery workers on Redis and PostgreSQL,
the provider simulator, signed callbacks into the live web server."""

import urllib.request
from datetime import timedelta

import pytest
from django.db import connection
from prometheus_client.parser import text_string_to_metric_families

from notify import tallies
from notify.models import Event, Observation, Tally, Transition
from notify.rules.vocabulary import Cause, Channel, Normalized, State
from notify.writes import wake_ups
from plumbing.clock import system_clock
from policies.models import ChannelPlan
from tests.factories import CANARY_EMAIL, CANARY_PHONE, CANARY_RESET_URL, PolicyVersionFactory, new_event
from tests.integration.processes import wait_for
from tests.notify.workers import next_phone

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

TERMINAL = {State.SMS_DELIVERED, State.EMAIL_ACCEPTED, State.EMAIL_FAILED, State.EXPIRED, State.SMS_FAILED}


def seconds(n):
    return timedelta(seconds=n)


def fast_policy(**fields):
    """A policy on a seconds scale, so a whole event life fits in a test."""
    scale = {
        "poll_interval": seconds(1),
        "sms_budget": seconds(4),
        "fallback_reserve": seconds(6),
        "poll_cost": seconds(0.2),
        "select_cost": seconds(0.1),
        "email_submit_cost": seconds(0.5),
        "record_cost": seconds(0.1),
        "lease_ttl": seconds(3),
        "email_backoff": seconds(0.5),
    }
    return PolicyVersionFactory.create(**(scale | fields))


def scripted(
    simulator,
    *,
    region="US",
    ttl=15,
    create=("accept",),
    statuses=(),
    callbacks="normal",
    smtp=None,
    hang_seconds=None,
    **destination,
):
    phone = destination.pop("phone", None) or next_phone()
    email = destination.pop("email", None) or f"subscriber.{phone[1:]}@example.org"
    simulator.control.script_sms(
        phone,
        create=list(create),
        statuses=[list(s) for s in statuses],
        callbacks=callbacks,
        hang_seconds=hang_seconds,
    )
    if smtp:
        simulator.control.script_email(email, smtp=list(smtp))
    event = new_event(system_clock.now(), phone=phone, email=email, region=region, ttl=seconds(ttl), **destination)
    wake_ups.send_after_commit(wake_ups.WakeUp(event.id, system_clock.now()))
    return event


def settled(*events, timeout=40.0):
    def all_terminal():
        states = dict(Event.objects.filter(pk__in=[e.id for e in events]).values_list("pk", "state"))
        return states if all(state in TERMINAL for state in states.values()) else None

    return wait_for(all_terminal, timeout=timeout, message="every event to reach a terminal state")


def test_events_reach_every_terminal_state_through_real_workers(simulator, start_worker):
    fast_policy()
    fast_policy(region="EU", channel_plan=ChannelPlan.SMS_ONLY)
    worker = start_worker(beat=True)
    events = {
        "delivered": scripted(simulator, statuses=[("sent", 0.2), ("delivered", 0.5)]),
        "failed_then_email": scripted(simulator, statuses=[("sent", 0.2), ("undelivered", 0.5)]),
        "no_receipt": scripted(simulator, statuses=[("sent", 0.2)], callbacks="drop"),
        "rejected_email_deferred": scripted(simulator, create=["reject"], smtp=["temp_fail"]),
        "sms_only_expires": scripted(simulator, region="EU", ttl=6, statuses=[("sent", 0.2)]),
        "sms_only_fails": scripted(simulator, region="EU", statuses=[("sent", 0.2), ("failed", 0.4)]),
        "noisy_callbacks": scripted(simulator, statuses=[("sent", 0.2), ("delivered", 0.4)], callbacks="duplicate"),
        "canary": scripted(
            simulator,
            statuses=[("sent", 0.2), ("failed", 0.4)],
            phone=CANARY_PHONE,
            email=CANARY_EMAIL,
            reset_url=CANARY_RESET_URL,
        ),
    }

    states = settled(*events.values())

    assert {name: states[event.id] for name, event in events.items()} == {
        "delivered": State.SMS_DELIVERED,
        "failed_then_email": State.EMAIL_ACCEPTED,
        "no_receipt": State.EMAIL_ACCEPTED,
        "rejected_email_deferred": State.EMAIL_FAILED,
        "sms_only_expires": State.EXPIRED,
        "sms_only_fails": State.SMS_FAILED,
        "noisy_callbacks": State.SMS_DELIVERED,
        "canary": State.EMAIL_ACCEPTED,
    }
    counts = simulator.control.counts()
    assert {name: counts["sms"].get(event.id, 0) for name, event in events.items()} == {
        name: 0 if name == "rejected_email_deferred" else 1 for name in events
    }
    deadline_claim = Transition.objects.get(event=events["no_receipt"], to_state=State.EMAIL_CLAIMED)
    assert deadline_claim.cause == Cause.DEADLINE
    # Receipts arrived by callback (signed, verified by the live server), not only by polling.
    callbacks = Observation.objects.filter(event=events["delivered"], source="callback", channel=Channel.SMS)
    assert callbacks.filter(normalized=Normalized.DELIVERED).exists()
    # Worker and beat logs (task arguments included) and the simulator's carry no destination or link.
    for canary in (CANARY_PHONE, CANARY_EMAIL, CANARY_RESET_URL):
        assert canary not in worker.log_text()
        assert canary not in simulator.log_text()


def test_metrics_served_by_the_web_process_count_the_worker_processes_work(
    simulator, start_worker, live_server, settings
):
    settings.METRICS_TOKEN = "integration-test-metrics-token"
    fast_policy()
    fast_policy(region="EU", channel_plan=ChannelPlan.SMS_ONLY)
    start_worker(beat=True)
    events = [
        scripted(simulator, statuses=[("sent", 0.2), ("delivered", 0.5)]),
        scripted(simulator, statuses=[("sent", 0.2), ("undelivered", 0.5)]),
        scripted(simulator, region="EU", ttl=6, statuses=[("sent", 0.2)]),
    ]
    settled(*events)
    wait_for(
        lambda: Tally.objects.filter(name=tallies.SWEEPER_LAST_RUN).exists(),
        timeout=20,
        message="the beat's sweeper to report in",
    )
    # What the beat's roll-up will count once the rows have settled, counted now.
    tallies.roll_up(system_clock.now() + tallies.SETTLE + timedelta(seconds=1))

    scrape = urllib.request.Request(
        f"{live_server.url}/metrics", headers={"Authorization": "Bearer integration-test-metrics-token"}
    )
    with urllib.request.urlopen(scrape, timeout=10) as response:
        text = response.read().decode()
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    us, eu = (("region", "US"),), (("region", "EU"),)
    assert samples[("reset_delivery_sms_terminal_seconds_count", us)] == 2
    assert samples[("reset_delivery_fallback_claim_remaining_lifetime_seconds_count", us)] == 1
    assert samples[("reset_delivery_expired_without_outcome_total", eu)] == 1
    assert samples[("reset_delivery_sweeper_last_run_timestamp_seconds", ())] > 0


def test_a_worker_killed_mid_submit_is_recovered_by_another_without_a_second_sms(simulator, start_worker):
    # Budget enough for a kill, a lease expiry and a fresh worker's start-up before the fallback.
    fast_policy(sms_budget=seconds(20))
    doomed = start_worker()
    # The provider accepts the message, then holds the response: the worker is killed mid-call.
    # No callbacks: only the next worker's lookup can find out what happened.
    event = scripted(
        simulator, ttl=40, create=["hang", "accept"], statuses=[("sent", 0.2), ("delivered", 0.4)], callbacks="drop"
    )
    wait_for(lambda: simulator.control.counts()["sms"].get(event.id) == 1, timeout=20, message="the accepted SMS")
    doomed.kill()

    start_worker(beat=True)
    states = settled(event)

    assert states[event.id] == State.SMS_DELIVERED
    assert simulator.control.counts()["sms"][event.id] == 1
    recovered = Observation.objects.filter(event=event, source="recovery", normalized=Normalized.ACCEPTED)
    assert recovered.exists()


def test_two_worker_processes_woken_together_send_one_sms(simulator, start_worker):
    fast_policy()
    start_worker(concurrency=2)
    start_worker(concurrency=2)
    event = scripted(simulator, statuses=[("sent", 0.2), ("delivered", 0.4)])
    for _ in range(20):
        wake_ups.send_after_commit(wake_ups.WakeUp(event.id, system_clock.now()))

    states = settled(event)

    assert states[event.id] == State.SMS_DELIVERED
    assert simulator.control.counts()["sms"][event.id] == 1


def _worker_backends(application_name):
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid, backend_start FROM pg_stat_activity"
            " WHERE application_name = %s AND datname = current_database()",
            [application_name],
        )
        return cursor.fetchall()


def test_a_worker_keeps_its_database_connection_across_steps_and_replaces_one_postgresql_dropped(
    simulator, start_worker
):
    # A new connection per task cost a quarter of a worker's step under load (bench
    # e2e-profile); the kept one must still not outlive PostgreSQL dropping it.
    fast_policy()
    # libpq names the worker's sessions, so they can be told from the live server's.
    worker = start_worker(concurrency=1, PGAPPNAME="reuse-probe")
    first = scripted(simulator, statuses=[("sent", 0.2), ("delivered", 0.4)])
    settled(first)
    [(backend, started)] = wait_for(lambda: _worker_backends("reuse-probe"), timeout=10, message="the kept connection")

    second = scripted(simulator, statuses=[("sent", 0.2), ("delivered", 0.4)])
    settled(second)

    # The same session served the second event's steps: it was not closed after each task.
    assert _worker_backends("reuse-probe") == [(backend, started)]
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [backend])
    third = scripted(simulator, statuses=[("sent", 0.2), ("delivered", 0.4)])
    # Replaced before use: the step after the drop runs at once, not after a failure and a sweep.
    assert settled(third, timeout=10)[third.id] == State.SMS_DELIVERED
    [(replacement, _)] = _worker_backends("reuse-probe")
    assert replacement != backend
    assert "Traceback" not in worker.log_text()
