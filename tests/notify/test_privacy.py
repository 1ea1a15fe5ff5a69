"""Canary: a recognizable phone number, address and link never leave the vault and the transports."""

import logging

import pytest
from django.core import serializers

from notify.models import Claim, Event, Observation, Transition
from notify.rules.vocabulary import State
from tests.factories import CANARY_EMAIL, CANARY_PHONE, CANARY_RESET_URL, new_event
from tests.notify.helpers import post_status
from tests.notify.workers import run_until_settled

pytestmark = pytest.mark.django_db(transaction=True)

CANARIES = (CANARY_PHONE, CANARY_PHONE.lstrip("+"), CANARY_EMAIL, CANARY_RESET_URL, "canary-token")


def assert_clean(text, where):
    for canary in CANARIES:
        assert canary not in text, f"{canary!r} leaked into {where}"


def test_no_destination_or_link_appears_in_logs_records_or_the_simulator_log(
    policy, clock, simulator, transports, client, caplog
):
    caplog.set_level(logging.DEBUG)
    simulator.control.script_sms(CANARY_PHONE, statuses=[["sent", 0], ["undelivered", 0]], callbacks="drop")
    event = new_event(clock.now(), phone=CANARY_PHONE, email=CANARY_EMAIL, reset_url=CANARY_RESET_URL)

    settled = run_until_settled(event.id, transports, clock)
    post_status(client, event.id, "delivered")  # a late receipt, through the web view

    assert settled.state == State.EMAIL_ACCEPTED
    assert_clean(caplog.text, "the application log")
    assert_clean(simulator.log_text(), "the simulator log")
    for model in (Event, Claim, Observation, Transition):
        assert_clean(serializers.serialize("json", model.objects.filter(**_of(model, event))), model.__name__)


def _of(model, event):
    return {"pk": event.pk} if model is Event else {"event": event}
