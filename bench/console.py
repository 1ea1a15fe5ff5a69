"""console_*_ms: server time of the console's list and event pages with a million events.

The table holds 1,000,000 events, 2% of them open (the rest terminal, as in a day's
production), every open event with its SMS claim, two transitions and 10 observations.
Each page is requested through Django's full stack (middleware, session, login and
permission check, view, template) in this process, with a logged-in responder; the
server time is the request's wall time. The ceiling is the same stack behind the same
permission check rendering an empty template: what the framework costs before the
console does anything. Requests are interleaved (list, event, empty, ...) so a noisy
moment on the machine lands on all three alike.
"""

import random
import time
from dataclasses import dataclass

from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.db import connection
from django.http import HttpResponse
from django.template import engines
from django.test import Client, override_settings
from django.urls import path

import config.urls
from bench import database
from bench.stats import spread
from policies.models import PolicyVersion
from runbook.console.access import ConsoleRequest, requires

EVENTS = 1_000_000
OPEN_SHARE = 0.02
OBSERVATIONS_PER_OPEN_EVENT = 10
REQUESTS = 400
OPEN_STATES = ["sms_requested", "sms_pending", "sms_failed", "email_claimed"]
TERMINAL_STATES = ["sms_delivered", "email_accepted", "email_failed", "expired"]


@requires("runbook.view_console")
def _empty(request: ConsoleRequest) -> HttpResponse:
    return HttpResponse(engines["django"].from_string("").render({}, request))


# The project's URLs plus the floor, for this process only.
urlpatterns = [*config.urls.urlpatterns, path("bench/empty", _empty)]


@dataclass(frozen=True)
class Timings:
    p50_ms: float
    p99_ms: float


@dataclass(frozen=True)
class Served:
    listing: Timings
    event: Timings
    empty: Timings


def run() -> Served:
    policy = database.reset_tables()
    # A second region, so half the events (and the region filter) land elsewhere.
    other = database.bench_policy("BENCHEU")
    started = time.perf_counter()
    _seed(policy, other)
    print(f"  seeded {EVENTS:,} events in {time.perf_counter() - started:.0f}s")
    print("  list query plan:", _list_plan())
    # The pages name their assets as production's do: from the manifest the deploy's collectstatic writes.
    call_command("collectstatic", "--no-input", verbosity=0)
    client = _responder_client()
    open_ids = _open_event_ids()
    samples: dict[str, list[float]] = {"list": [], "event": [], "empty": []}
    rng = random.Random(7)
    with override_settings(ROOT_URLCONF=__name__):
        for warmup in ("/", f"/events/{open_ids[0]}", "/bench/empty"):
            client.get(warmup)
        for _ in range(REQUESTS):
            for name, url in (
                ("list", rng.choice(["/", f"/?state={rng.choice(OPEN_STATES)}", "/?region=BENCHEU"])),
                ("event", f"/events/{rng.choice(open_ids)}"),
                ("empty", "/bench/empty"),
            ):
                begun = time.perf_counter()
                response = client.get(url)
                samples[name].append((time.perf_counter() - begun) * 1000)
                assert response.status_code == 200, (url, response.status_code)
    served = Served(*(_timings(samples[name]) for name in ("list", "event", "empty")))
    print(f"  list p50 {served.listing.p50_ms:.1f} ms, p99 {served.listing.p99_ms:.1f} ms")
    print(f"  event p50 {served.event.p50_ms:.1f} ms, p99 {served.event.p99_ms:.1f} ms")
    print(f"  empty template p50 {served.empty.p50_ms:.1f} ms, p99 {served.empty.p99_ms:.1f} ms")
    return served


def _timings(values: list[float]) -> Timings:
    p50, p99, _ = spread(values)
    return Timings(p50_ms=p50, p99_ms=p99)


def _responder_client() -> Client:
    user, _ = User.objects.get_or_create(username="bench-responder")
    user.groups.add(Group.objects.get(name="responders"))
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    return client


def _open_event_ids() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT id FROM notify_event WHERE act_by IS NOT NULL ORDER BY random() LIMIT 2000")
        return [row[0] for row in cursor.fetchall()]


def _list_plan() -> str:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN SELECT id FROM notify_event WHERE act_by IS NOT NULL ORDER BY act_by, id LIMIT 50")
        return " / ".join(row[0].strip() for row in cursor.fetchall()[:3])


def _seed(policy: PolicyVersion, other: PolicyVersion) -> None:
    """Fill the tables in SQL (a million ORM objects would take longer than the benchmark).

    Every 50th event is open, in one of the four open states with the next action and
    claims that state implies; it expires within the next hour and its act_by is its
    expiry less the policy's remaining-step costs, so the list's first page holds a mix of
    at-risk and roomy events. The others ended within the last day.
    Events alternate between the two regions in blocks of 50, so both have open events.
    """
    open_every = round(1 / OPEN_SHARE)
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO notify_event (
                id, service, client_key, request_fingerprint, purpose, region, policy_id,
                fallback_available, sms_recipient_ref, email_recipient_ref, created_at, expires_at,
                state, version, state_entered_at, last_observation_at, next_action, next_action_at,
                act_by, wake_at, lease_owner, lease_expires_at, lease_token)
            SELECT
                'evt_bench_' || lpad(n::text, 8, '0'), 'bench', 'bench-' || n, '', 'password_reset',
                CASE WHEN n / %(open_every)s %% 2 = 0 THEN %(region)s ELSE %(other_region)s END,
                CASE WHEN n / %(open_every)s %% 2 = 0 THEN %(policy)s ELSE %(other)s END,
                true, 'ref', 'ref', created, expires, state, 3, created + (now() - created) / 2, now() - interval '2s',
                CASE state WHEN 'sms_requested' THEN 'submit_sms' WHEN 'sms_pending' THEN 'poll_sms'
                           WHEN 'sms_failed' THEN 'claim_email' WHEN 'email_claimed' THEN 'submit_email'
                           ELSE 'none' END,
                CASE WHEN is_open THEN now() + make_interval(secs => n %% 10) END,
                -- act_by = expiry less the remaining steps' costs (bench policy: 9 s, 7 s after a
                -- failed SMS, 6 s once the email is claimed).
                CASE WHEN is_open THEN expires - make_interval(secs =>
                    CASE state WHEN 'sms_failed' THEN 7 WHEN 'email_claimed' THEN 6 ELSE 9 END) END,
                NULL, '', NULL, 0
            FROM (
                SELECT n, is_open,
                       CASE WHEN is_open THEN (%(open)s::text[])[1 + (n / %(open_every)s) %% 4]
                            ELSE (%(terminal)s::text[])[1 + n %% 4] END AS state,
                       CASE WHEN is_open THEN now() - make_interval(secs => n %% 300)
                            ELSE now() - make_interval(secs => 600 + n %% 86400) END AS created,
                       CASE WHEN is_open THEN now() + make_interval(secs => 60 + n::bigint * 7919 %% 3600)
                            ELSE now() - make_interval(secs => n %% 86400) END AS expires
                FROM (SELECT n, n %% %(open_every)s = 0 AS is_open FROM generate_series(1, %(events)s) AS n) AS numbered
            ) AS events
            """,
            {
                "region": policy.region,
                "policy": policy.pk,
                "other_region": other.region,
                "other": other.pk,
                "open_every": open_every,
                "open": OPEN_STATES,
                "terminal": TERMINAL_STATES,
                "events": EVENTS,
            },
        )
        cursor.execute(
            """
            INSERT INTO notify_claim (event_id, channel, key, state, attempts, provider_ref, submitted_at,
                                      next_attempt_at, created_at, updated_at)
            SELECT id, 'sms', 'reset-sms:' || id, 'accepted', 1, 'SM' || md5(id), created_at, NULL::timestamptz,
                   created_at, created_at
            FROM notify_event WHERE act_by IS NOT NULL
            UNION ALL
            SELECT id, 'email', 'reset-email:' || id, 'claimed', 0, '', NULL::timestamptz, NULL::timestamptz,
                   state_entered_at, state_entered_at
            FROM notify_event WHERE act_by IS NOT NULL AND state = 'email_claimed'
            """
        )
        cursor.execute(
            """
            INSERT INTO notify_transition (event_id, from_state, to_state, version, cause, actor, at)
            SELECT id, s.from_state, s.to_state, s.version, 'observation', 'worker:bench', created_at
            FROM notify_event, (VALUES ('', 'sms_requested', 1), ('sms_requested', 'sms_pending', 2))
                 AS s(from_state, to_state, version)
            WHERE act_by IS NOT NULL
            """
        )
        cursor.execute(
            """
            INSERT INTO notify_observation (event_id, channel, source, raw_status, normalized, provider_time,
                                            recorded_at, effect, actor, note, raw_payload, dedup_key)
            SELECT id, 'sms', 'poll', 'sent', 'pending', NULL, created_at + make_interval(secs => k * 5),
                   'recorded', 'worker:bench', '', '', ''
            FROM notify_event, generate_series(1, %(per_event)s) AS k
            WHERE act_by IS NOT NULL
            """,
            {"per_event": OBSERVATIONS_PER_OPEN_EVENT},
        )
        # Vacuumed as autovacuum would have: index-only scans rely on the visibility map.
        cursor.execute("VACUUM ANALYZE notify_event, notify_claim, notify_transition, notify_observation")
