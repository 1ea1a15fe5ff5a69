"""Where a creation's and a callback's web CPU goes: each part timed on its own, in this process.

The HTTP figures (``bench/api.py``) say how fast the whole path is; these say which part
costs what. Each part runs ``REPEAT`` times on the benchmark's database and broker, after a
warm-up, and is reported as CPU per call (``time.process_time``: this process's user and
system time, so a wait on PostgreSQL or Redis counts only its client side) and wall time
per call. The parts are the real functions the views call, in the order a request meets them.
"""

import json
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import timedelta

import phonenumbers
import redis
from django.conf import settings
from django.http import QueryDict
from django.test import RequestFactory
from twilio.request_validator import RequestValidator

from bench.api import BROKER, creation_body, pending_sms_events, signed_callback
from notify import intake, vault
from notify.api.auth import ServiceTokenAuth
from notify.api.events import reset_request
from notify.api.schemas import CreatedEvent, CreateEvent
from notify.messages import sms_callback_url
from notify.models import ServiceToken
from notify.rules import plan
from notify.rules.vocabulary import Channel, Normalized, Source
from notify.writes import moves, sql, wake_ups
from plumbing.clock import current_clock
from policies.cache import published_version, still_published

REPEAT = 300
WARM_UP = 20


@dataclass(frozen=True)
class Part:
    name: str
    cpu_ms: float  # per call
    wall_ms: float


def run() -> tuple[list[Part], list[Part]]:
    """Return the parts of a creation and of a signed status callback."""
    token = ServiceToken.issue("bench-parts", now=current_clock().now())[1]
    rng = random.Random(7)
    bodies = [json.dumps(creation_body(rng)).encode() for _ in range(REPEAT + WARM_UP)]
    # The gunicorn under test logs at WARNING (bench/api.py); so does this process meanwhile.
    logging.disable(logging.INFO)
    try:
        return _creation_parts(token, bodies), _callback_parts()
    finally:
        logging.disable(logging.NOTSET)
        if settings.CELERY_BROKER_URL == BROKER:  # the wake-ups published for no worker
            redis.Redis.from_url(BROKER).flushdb()


def _timed(name: str, call: Callable[[int], object]) -> Part:
    for number in range(WARM_UP):
        call(number)
    cpu, wall = time.process_time(), time.perf_counter()
    for number in range(WARM_UP, WARM_UP + REPEAT):
        call(number)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return Part(name, cpu * 1000 / REPEAT, wall * 1000 / REPEAT)


def _creation_parts(token: str, bodies: list[bytes]) -> list[Part]:
    auth = ServiceTokenAuth()
    request = RequestFactory().post("/api/v1/events")
    payloads = [CreateEvent.model_validate_json(body) for body in bodies]
    resets = [reset_request("bench-parts", payload) for payload in payloads]
    checked = [intake.checked_destinations(reset) for reset in resets]
    # The same requests with a subscriber's locale and time zone, as a localized caller sends them.
    worded = [replace(reset, locale="de-AT", time_zone="Europe/Vienna") for reset in resets]
    policy = published_version("US")
    assert policy is not None, "the benchmark loads the default policies first"
    now = current_clock().now()

    def insert(number: int) -> object:
        reset, sealed_for = resets[number], checked[number].destinations
        start = intake.starting_point(policy, reset, checked[number])
        audience = intake.audience_of(reset)
        fingerprint = intake.request_fingerprint(reset, sealed_for, audience)
        event, dependents = intake.new_rows(
            reset, policy, start, sealed_for, audience, fingerprint, now + timedelta(minutes=10), now, True
        )
        return sql.insert_together(event, ("service", "client_key"), dependents, only_if=still_published(policy))

    created = {"event_id": "evt_01JBENCHPARTS0000000000000", "state": "sms_requested", "region": "US",
               "policy_version": 1, "expires_at": now, "next_action": "submit_sms",
               "console_url": "https://console.example.org/events/evt_01JBENCHPARTS0000000000000"}  # fmt: skip
    return [
        _timed("token check (digest lookup)", lambda number: auth.authenticate(request, token)),
        _timed("body parse and validation (schema)", lambda number: CreateEvent.model_validate_json(bodies[number])),
        _timed("phone parsing (phonenumbers)", lambda number: _parse_phone(payloads[number].phone)),
        _timed("destinations checked (phone, email, URL)", lambda n: intake.checked_destinations(resets[n])),
        _timed("locale and time zone checked (Babel, zoneinfo)", lambda n: intake.audience_of(worded[n])),
        _timed(
            "sealing (Fernet) and hashing (HMAC x3)",
            lambda number: _seal_and_hash(resets[number], checked[number].destinations),
        ),
        _timed("rows built and the INSERT (one statement)", insert),
        _timed("wake-up publish (Celery to Redis)", lambda number: wake_ups.publish("evt_01JBENCHPARTSNOTANEVENT00")),
        _timed("response (schema and JSON)", lambda number: CreatedEvent.model_validate(created).model_dump_json()),
    ]


def _parse_phone(phone: str) -> str:
    number = phonenumbers.parse(phone, None)
    assert phonenumbers.is_valid_number(number)
    return phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)


def _seal_and_hash(reset: intake.ResetRequest, destinations: vault.Destinations) -> object:
    vault.keyed_hash(destinations.phone)
    vault.keyed_hash(destinations.email)
    intake.request_fingerprint(reset, destinations, intake.audience_of(reset))
    return vault.seal(destinations)


def _callback_parts() -> list[Part]:
    """A delivered receipt for events in ``sms_pending``, as Twilio posts it."""
    pending = pending_sms_events(REPEAT + WARM_UP, "bench-parts")
    validator = RequestValidator(settings.TWILIO_AUTH_TOKEN)
    posts = []
    for event_id, sid in pending:
        signed = signed_callback(event_id, sid, "delivered")
        query = QueryDict(mutable=True)
        query.update(signed.params)
        posts.append((event_id, sms_callback_url(event_id), query, signed.signature))

    def transition(number: int) -> object:
        event_id, sid = posts[number][0], f"SM{number:032d}"
        observation = plan.ObservationInput(
            Channel.SMS, Source.CALLBACK, Normalized.DELIVERED, raw_status="delivered",
            provider_ref=sid, dedup_key=f"{sid}:delivered",
        )  # fmt: skip
        return moves.record_receipt(event_id, observation, now=current_clock().now(), actor="bench")

    return [
        _timed(
            "signature check (X-Twilio-Signature)", lambda n: validator.validate(posts[n][1], posts[n][2], posts[n][3])
        ),
        _timed("transition (observation, CAS, claim)", transition),
    ]


def table(title: str, parts: list[Part]) -> str:
    lines = [f"| {title} | CPU / call | wall / call |", "|---|---|---|"]
    lines += [f"| {part.name} | {part.cpu_ms:.3f} ms | {part.wall_ms:.3f} ms |" for part in parts]
    lines.append(
        f"| sum of the parts | {sum(p.cpu_ms for p in parts):.3f} ms | {sum(p.wall_ms for p in parts):.3f} ms |"
    )
    return "\n".join(lines)
