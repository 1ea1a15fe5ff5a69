"""Idempotent creation under real concurrency on PostgreSQL."""

from collections import Counter

import pytest
from django.test import Client

from notify.models import Claim, Event
from tests.api.payloads import body, post
from tests.concurrency import race

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_eight_parallel_requests_with_one_client_key_create_one_event_and_one_claim(policy, token):
    request = body(client_key="retry-storm")

    answers = race(lambda i: post(Client(), request, Authorization=f"Bearer {token}"))

    assert Counter(answer.status_code for answer in answers) == Counter({201: 1, 200: 7})
    assert len({answer.json()["event_id"] for answer in answers}) == 1
    assert (Event.objects.count(), Claim.objects.count()) == (1, 1)
