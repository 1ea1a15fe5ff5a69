"""Leases and deadlines on the database's clock: a host whose clock is off by 30 s decides nothing wrong.

These run on real time (the database's clock cannot be frozen). Each contrasts the
database's clock with this host's own, pinned into the statements as before: the host's
clock is what let a worker running ahead take over a live lease.
"""

import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection
from django.urls import reverse

from notify import worker
from notify.models import Event, HostClock
from notify.rules.vocabulary import Channel, NextAction
from notify.transports import Transports, lease_hold
from notify.writes import leases
from notify.writes import sql as write_sql
from plumbing import clockwatch
from plumbing.clock import DatabaseClock, SystemClock, parse_database_time
from tests.concurrency import run_interleaved
from tests.factories import new_event

pytestmark = pytest.mark.django_db(transaction=True)

LEASE = timedelta(seconds=30)


def database_now() -> datetime:
    now, _ = write_sql.database_time(None)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {now}".replace("%%", "%"))
        return parse_database_time(cursor.fetchone()[0])


@pytest.fixture
def database_clock(settings):
    settings.NOTIFY_CLOCK = "database"
    return DatabaseClock(SystemClock())


class NoProvider:
    """A provider that must not be called."""

    absence_horizon = timedelta(seconds=60)

    def __getattr__(self, name):
        raise AssertionError(f"the provider was called ({name})")


NO_PROVIDERS = Transports(NoProvider(), NoProvider())


def test_a_worker_whose_clock_runs_30s_ahead_does_not_take_over_a_live_lease(policy, settings, database_clock):
    event = new_event(database_now())
    assert leases.take(event.id, "holder", at=None, ttl=LEASE)
    settings.NOTIFY_CLOCK_OFFSET = 31

    ahead = worker.step_event(event.id, transports=NO_PROVIDERS, clock=database_clock, owner="ahead")

    assert ahead.result == "busy"
    assert Event.objects.get(pk=event.id).lease_owner == "holder"


def test_judged_by_its_own_clock_the_same_worker_would_take_over(policy, settings):
    # What the database's clock prevents: the host's own time, pinned into the statement.
    event = new_event(database_now())
    assert leases.take(event.id, "holder", at=None, ttl=LEASE)
    settings.NOTIFY_CLOCK_OFFSET = 31

    assert leases.take(event.id, "ahead", at=SystemClock().pinned(), ttl=LEASE) is not None


def test_a_worker_whose_clock_runs_30s_behind_cannot_keep_an_expired_lease(policy, settings, database_clock):
    event = new_event(database_now())
    lease = leases.take(event.id, "behind", at=None, ttl=timedelta(milliseconds=50))
    assert lease is not None
    settings.NOTIFY_CLOCK_OFFSET = -30
    expires = Event.objects.get(pk=event.id).lease_expires_at
    assert expires is not None
    while database_now() <= expires:
        pass

    assert not leases.renew(event.id, lease, at=database_clock.pinned(), ttl=LEASE)
    assert leases.renew(event.id, lease, at=SystemClock().pinned(), ttl=LEASE)  # its own clock would


def test_the_intent_holds_the_lease_and_sets_the_settle_time_on_the_databases_clock(
    policy, settings, database_clock, simulator, transports
):
    settings.NOTIFY_CLOCK_OFFSET = 30
    event = new_event(database_now())

    before = database_now()
    report = worker.step_event(event.id, transports=transports, clock=database_clock, owner="ahead", max_actions=1)
    after = database_now()

    assert report.actions == (NextAction.SUBMIT_SMS,)
    claim = event.claims.get(channel=Channel.SMS)
    assert before <= claim.attempt_started_at <= after
    assert claim.submitted_at == claim.attempt_started_at


def test_the_console_will_not_release_a_live_lease_when_its_host_runs_ahead(policy, settings, client):
    settings.NOTIFY_CLOCK = "database"
    event = new_event(database_now())
    lease = leases.take(event.id, "worker-mid-call", at=None, ttl=LEASE)
    assert lease is not None
    responder = User.objects.create_user("rita")
    responder.groups.add(Group.objects.get(name="responders"))
    client.force_login(responder)
    settings.NOTIFY_CLOCK_OFFSET = 31  # the web host's clock says the lease ran out a second ago

    client.post(reverse("runbook:release-lease", args=[event.id]), {"lease_token": lease.token})

    held = Event.objects.get(pk=event.id)
    assert (held.lease_owner, held.lease_token) == ("worker-mid-call", lease.token)


def test_the_database_clock_reads_the_databases_time_whatever_the_hosts_clock_says(settings):
    settings.NOTIFY_CLOCK_OFFSET = 30
    clock = DatabaseClock(SystemClock())

    read = clock.now()

    assert abs((read - database_now()).total_seconds()) < 1
    assert abs((SystemClock().now() - read).total_seconds() - 30) < 1


def test_each_worker_step_reports_its_hosts_offset_for_the_metrics(policy, settings, database_clock):
    clockwatch.flush()  # what earlier readings in this process left in the window
    settings.NOTIFY_CLOCK_OFFSET, settings.NOTIFY_HOST_NAME = -30, "worker-behind"
    event = new_event(database_now())
    leases.take(event.id, "holder", at=None, ttl=LEASE)

    worker.step_event(event.id, transports=NO_PROVIDERS, clock=database_clock, owner="behind")
    clockwatch.flush()

    reported = HostClock.objects.get(host="worker-behind")
    assert abs(reported.offset_seconds + 30) < 1
    assert abs(reported.measured_at - database_now()) < timedelta(seconds=5)


def test_metrics_show_each_hosts_recent_offset_and_not_a_stale_one(settings, client):
    settings.METRICS_TOKEN = "metrics-token-for-this-test"
    now = database_now()
    HostClock.objects.create(host="worker-ahead", offset_seconds=31.5, measured_at=now)
    HostClock.objects.create(host="worker-gone", offset_seconds=-40.0, measured_at=now - timedelta(hours=1))

    body = client.get("/metrics", headers={"Authorization": "Bearer metrics-token-for-this-test"}).content.decode()

    assert 'reset_delivery_host_clock_offset_seconds{host="worker-ahead"} 31.5' in body
    assert "worker-gone" not in body


def test_a_lease_is_held_past_the_calls_whole_bound(settings):
    settings.EMAIL_SEND_DEADLINE, settings.NOTIFY_LEASE_MARGIN = 40.0, timedelta(seconds=5)

    assert lease_hold(Channel.EMAIL, timedelta(seconds=30)) == timedelta(seconds=45)
    assert lease_hold(Channel.EMAIL, timedelta(seconds=60)) == timedelta(seconds=60)


def test_database_time_parses_postgresql_and_sqlite_readings():
    aware = datetime(2026, 12, 4, 15, 0, tzinfo=UTC)

    assert parse_database_time(aware) == aware
    assert parse_database_time("2026-12-04 15:00:00.000") == aware


def test_threads_reporting_offsets_together_write_only_real_offsets(settings, monkeypatch):
    # A gthread web worker or a threads-pool worker reads the database's clock from several
    # threads at once; under callback load one thread wrote a window another had just
    # emptied, sending NULL to the database: a 500 on a Twilio callback.
    settings.NOTIFY_HOST_NAME = "threaded-host"
    monkeypatch.setattr(clockwatch, "FLUSH_EVERY", 0.0)  # every report writes: the race at its widest
    clockwatch.flush()
    failures: list[BaseException] = []

    def reporter(offset: float) -> None:
        try:
            for _ in range(400):
                clockwatch.report(offset)
        except BaseException as failure:  # the thread's failure is the test's
            failures.append(failure)
        finally:
            connection.close()

    threads = [threading.Thread(target=reporter, args=(0.25 * (n + 1),)) for n in range(8)]
    run_interleaved(threads)

    assert failures == []
    assert 0 < HostClock.objects.get(host="threaded-host").offset_seconds <= 2.0
