"""The PagerDuty Events v2 stand-in: what it takes, what it refuses, its rate limit, its outages, its log."""

import time
from datetime import UTC, datetime, timedelta

import pytest
import requests

from runbook.paging import pagerduty
from simulator.control import SimulatorControlError
from simulator.pager_limit import EVENTS_PER_WINDOW, WINDOW_SECONDS
from simulator.tests.helpers import wait_for

ROUTING_KEY = "R0UT1NGKEYF0RTHEUSREG10N0000000A"
OTHER_KEY = "R0UT1NGKEYF0RTHEEUREG10N0000000B"


def trigger(dedup_key="evt_1", routing_key=ROUTING_KEY, **payload):
    fields = {"summary": "reset_delivery_deadline_at_risk: US", "source": "reset-delivery", "severity": "critical"}
    return {
        "routing_key": routing_key,
        "event_action": "trigger",
        "dedup_key": dedup_key,
        "payload": fields | payload,
    }


def resolve(dedup_key="evt_1"):
    return {"routing_key": ROUTING_KEY, "event_action": "resolve", "dedup_key": dedup_key}


def send(simulator, message, *, timeout=5.0):
    return requests.post(f"{simulator.base_url}/v2/enqueue", json=message, timeout=timeout)


def statuses(simulator):
    return [(m["action"], m["dedup_key"], m["status"], m["outcome"]) for m in simulator.control.pager_log()]


def test_a_valid_trigger_is_accepted_and_logged_with_its_arrival_time(simulator):
    before = datetime.now(UTC)
    answer = send(simulator, trigger("evt_accepted"))
    after = datetime.now(UTC)

    assert answer.status_code == 202
    assert answer.json() == {"status": "success", "message": "Event processed", "dedup_key": "evt_accepted"}
    [logged] = simulator.control.pager_log()
    assert (logged["action"], logged["dedup_key"], logged["status"]) == ("trigger", "evt_accepted", 202)
    assert before <= datetime.fromisoformat(logged["at"]) <= after


def test_triggers_and_resolves_are_logged_in_arrival_order(simulator):
    for message in (trigger("evt_a"), trigger("evt_b"), resolve("evt_a")):
        send(simulator, message)

    assert statuses(simulator) == [
        ("trigger", "evt_a", 202, "accepted"),
        ("trigger", "evt_b", 202, "accepted"),
        ("resolve", "evt_a", 202, "accepted"),
    ]


def test_a_trigger_without_a_dedup_key_is_given_one_by_the_pager(simulator):
    message = trigger()
    del message["dedup_key"]

    key = send(simulator, message).json()["dedup_key"]

    assert key
    assert statuses(simulator) == [("trigger", key, 202, "accepted")]


@pytest.mark.parametrize(
    ("message", "error"),
    [
        ("not an object", "Event object is not a JSON object"),
        (trigger(routing_key=""), "'routing_key' is missing or blank"),
        (trigger() | {"event_action": "explode"}, "'event_action' is invalid"),
        ({"routing_key": ROUTING_KEY, "event_action": "resolve"}, "'dedup_key' is required to resolve"),
        (trigger() | {"payload": None}, "'payload' is missing or not an object"),
        (trigger(summary=""), "'payload.summary' is missing or blank"),
        (trigger(source=" "), "'payload.source' is missing or blank"),
        (trigger(severity="panic"), "'payload.severity' is invalid"),
        (trigger("k" * 256), "'dedup_key' is longer than 255 characters"),
    ],
)
def test_an_invalid_message_is_refused_with_400_in_pagerdutys_error_shape(simulator, message, error):
    answer = send(simulator, message)

    assert answer.status_code == 400
    body = answer.json()
    assert (body["status"], body["message"]) == ("invalid event", "Event object is invalid")
    assert [line for line in body["errors"] if line.startswith(error)] != []
    assert [entry["status"] for entry in simulator.control.pager_log()] == [400]


def test_a_body_that_is_not_json_is_refused_with_400(simulator):
    answer = requests.post(f"{simulator.base_url}/v2/enqueue", data=b"{not json", timeout=5)

    assert answer.status_code == 400
    assert statuses(simulator) == [("", "", 400, "invalid")]


def test_past_120_a_minute_one_routing_key_is_refused_with_429_and_retry_after_while_another_is_taken(simulator):
    with requests.Session() as session:
        url = f"{simulator.base_url}/v2/enqueue"
        accepted = [session.post(url, json=trigger(f"evt_{n}"), timeout=5).status_code for n in range(120)]
        refused = session.post(url, json=trigger("evt_over"), timeout=5)
        other = session.post(url, json=trigger("evt_other", routing_key=OTHER_KEY), timeout=5)

    assert accepted == [202] * EVENTS_PER_WINDOW
    assert refused.status_code == 429
    assert 1 <= int(refused.headers["Retry-After"]) <= WINDOW_SECONDS
    assert other.status_code == 202
    assert statuses(simulator)[-2:] == [
        ("trigger", "evt_over", 429, "rate_limited"),
        ("trigger", "evt_other", 202, "accepted"),
    ]


def wait_until_elapsed(started, seconds):
    time.sleep(max(0.0, started + seconds - time.monotonic()))


def test_an_outage_goes_through_its_phases_in_order_and_then_recovers(simulator):
    # One second each; every message is sent 0.3 s into its phase, clear of both ends.
    simulator.control.pager_outage(
        [
            {"mode": "timeout", "seconds": 1, "hang_seconds": 2},
            {"mode": "throttle", "seconds": 1, "retry_after": 7},
            {"mode": "error", "seconds": 1, "status": 502},
        ]
    )
    started = time.monotonic()

    wait_until_elapsed(started, 0.3)
    with pytest.raises(requests.Timeout):
        send(simulator, trigger("evt_held"), timeout=0.4)
    wait_until_elapsed(started, 1.3)
    throttled = send(simulator, trigger("evt_throttled"))
    wait_until_elapsed(started, 2.3)
    failed = send(simulator, trigger("evt_failed"))
    wait_until_elapsed(started, 3.3)
    recovered = send(simulator, trigger("evt_recovered"))

    assert (throttled.status_code, throttled.headers["Retry-After"]) == (429, "7")
    assert failed.status_code == 502
    assert recovered.status_code == 202
    assert statuses(simulator) == [
        ("trigger", "evt_held", 0, "timeout"),
        ("trigger", "evt_throttled", 429, "throttle"),
        ("trigger", "evt_failed", 502, "error"),
        ("trigger", "evt_recovered", 202, "accepted"),
    ]


def test_a_message_held_by_a_timeout_is_dropped_without_an_answer(simulator):
    simulator.control.pager_outage([{"mode": "timeout", "seconds": 5, "hang_seconds": 0.2}])

    # The hang ends well within this client's patience: what comes then is a closed connection.
    with pytest.raises(requests.ConnectionError):
        send(simulator, trigger("evt_dropped"), timeout=3)

    assert statuses(simulator) == [("trigger", "evt_dropped", 0, "timeout")]


def test_an_empty_outage_ends_the_one_in_progress(simulator):
    simulator.control.pager_outage([{"mode": "error", "seconds": 60}])
    refused = send(simulator, resolve())

    simulator.control.pager_outage([])

    assert refused.status_code == 503
    assert send(simulator, resolve()).status_code == 202


def test_reset_forgets_the_log_and_ends_the_outage(simulator):
    simulator.control.pager_outage([{"mode": "throttle", "seconds": 60, "retry_after": 30}])
    assert send(simulator, trigger()).status_code == 429

    simulator.control.reset()

    assert simulator.control.pager_log() == []
    assert send(simulator, trigger()).status_code == 202


@pytest.mark.parametrize(
    ("phase", "error"),
    [
        ({"mode": "flood", "seconds": 1}, "phases[0].mode: 'flood' is not one of timeout, throttle, error"),
        ({"mode": "error", "seconds": 0}, "phases[0].seconds: must be positive"),
        ({"mode": "error", "seconds": 1, "status": 404}, "phases[0].status: must be a 5xx status"),
        ({"mode": "throttle", "seconds": 1, "retry_after": 1.5}, "phases[0].retry_after: must be whole seconds"),
        ({"mode": "timeout", "seconds": 1, "status": 503}, "phases[0].status: unknown key"),
    ],
)
def test_an_invalid_outage_is_refused_with_the_reason(simulator, phase, error):
    with pytest.raises(SimulatorControlError, match=error.replace("[", r"\[").replace("]", r"\]")):
        simulator.control.pager_outage([phase])


def test_the_log_never_contains_a_routing_key_nor_a_payload(simulator):
    summary = "summary-canary-not-for-logs"
    send(simulator, trigger("evt_private", summary=summary))
    send(simulator, {"routing_key": ROUTING_KEY, "event_action": "resolve"})
    simulator.control.pager_outage([{"mode": "error", "seconds": 60}])
    send(simulator, trigger("evt_private_outage", summary=summary))

    log = wait_for(lambda: text if "evt_private_outage" in (text := simulator.log_text()) else None)
    assert ROUTING_KEY not in log
    assert summary not in log


@pytest.mark.parametrize(
    ("phase", "answered", "throttled", "retry_after"),
    [
        ({"mode": "timeout", "seconds": 60, "hang_seconds": 2}, False, False, None),
        ({"mode": "throttle", "seconds": 60, "retry_after": 7}, True, True, timedelta(seconds=7)),
        ({"mode": "error", "seconds": 60, "status": 500}, True, False, None),
    ],
)
def test_the_products_pager_client_reads_each_outage_phase_as_what_it_is(
    simulator, phase, answered, throttled, retry_after
):
    url = f"{simulator.base_url}/v2/enqueue"
    pagerduty.post(url, trigger("evt_before"), timedelta(seconds=1))
    simulator.control.pager_outage([phase])

    with pytest.raises(pagerduty.PagerError) as refused:
        pagerduty.post(url, trigger("evt_during"), timedelta(seconds=0.5))

    assert (refused.value.answered, refused.value.throttled, refused.value.retry_after) == (
        answered,
        throttled,
        retry_after,
    )
