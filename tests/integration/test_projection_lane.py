"""A draft's projection is computed by a real Celery worker consuming the projections lane."""

import pytest

from plumbing.clock import system_clock
from policies import lifecycle
from policies.models import content_digest
from runbook.evidence import projections
from runbook.models import Projection
from tests.factories import PolicyVersionFactory
from tests.integration.processes import wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_a_saved_draft_is_projected_by_the_projections_lane(start_worker, broker):
    start_worker(queues="projections", concurrency=1, PROJECTION_GENERATED_RECORDS="300")
    published = PolicyVersionFactory.create()
    draft = lifecycle.draft_from(published, author=None, reason="a test draft")

    projections.request(draft, system_clock.now())  # committed at once here: the task is sent

    def done() -> Projection | None:
        return Projection.objects.filter(policy=draft, content_hash=content_digest(draft)).first()

    projection = wait_for(done, timeout=60, message="the projections lane to compute the draft's projection")
    assert (projection.records, projection.generated, projection.compared_with) == (300, True, str(published))
    assert set(projection.figures) == {"published", "draft"}
