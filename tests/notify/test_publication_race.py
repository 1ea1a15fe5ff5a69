"""Creations racing publications on PostgreSQL: the version a process presumes never outlives its retirement."""

import threading
import time

import pytest
from django.db import transaction

from notify.writes.create import create_event
from policies.models import PolicyVersion, Stage
from tests.concurrency import THREADS, race
from tests.factories import PolicyVersionFactory, reset_request

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

PUBLICATIONS = 6
CREATIONS_PER_THREAD = 20


def test_no_creation_is_pinned_to_a_version_retired_before_it_began(policy, clock):
    # One thread publishes new US versions while the others create events. The creators share
    # this process's presumption of the published version, as a server's threads do, and no
    # one tells them of a publication: each must still be written under a version at least as
    # new as the one published when its call began.
    published: list[tuple[float, int]] = [(time.monotonic(), policy.number)]
    lock = threading.Lock()

    def publish_all() -> list[tuple[float, int]]:
        for number in range(policy.number + 1, policy.number + 1 + PUBLICATIONS):
            time.sleep(0.02)
            with transaction.atomic():
                PolicyVersion.objects.filter(region="US", status=Stage.PUBLISHED).update(status=Stage.RETIRED)
                PolicyVersionFactory.create(region="US", number=number)
            with lock:
                published.append((time.monotonic(), number))
        return []

    def create_all(i: int) -> list[tuple[float, int]]:
        if i == 0:
            return publish_all()
        created = []
        for _ in range(CREATIONS_PER_THREAD):
            began = time.monotonic()
            event = create_event(reset_request(), now=clock.now()).event
            created.append((began, event.policy.number))
            time.sleep(0.005)
        return created

    creations = [creation for result in race(create_all) for creation in result]

    assert len(creations) == (THREADS - 1) * CREATIONS_PER_THREAD
    stale = [
        (number, newest)
        for began, number in creations
        if number < (newest := max(n for committed, n in published if committed < began))
    ]
    assert stale == []
    assert {number for _, number in creations} != {policy.number}, "the creations overlapped no publication"
