"""A policy version refuses durations that would make the workflow meaningless."""

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError

from policies.models import DURATION_FIELDS, LONGEST_LIFETIME
from tests.factories import PolicyVersionFactory


def test_a_reviewed_policy_validates(db):
    PolicyVersionFactory.build().full_clean(exclude=["number"])


@pytest.mark.parametrize("field", DURATION_FIELDS)
@pytest.mark.parametrize("value", [timedelta(0), timedelta(seconds=-1)])
def test_every_duration_must_be_positive(field, value):
    policy = PolicyVersionFactory.build(**{field: value})

    with pytest.raises(ValidationError) as invalid:
        policy.clean()

    assert invalid.value.message_dict[field] == [f"{field} must be positive"]


def test_the_fallback_reserve_must_cover_the_email_submit_and_its_record():
    policy = PolicyVersionFactory.build(
        fallback_reserve=timedelta(seconds=5),
        email_submit_cost=timedelta(seconds=5),
        record_cost=timedelta(seconds=1),
    )

    with pytest.raises(ValidationError) as invalid:
        policy.clean()

    assert list(invalid.value.message_dict) == ["fallback_reserve"]
    assert "email submit + record" in invalid.value.message_dict["fallback_reserve"][0]


def test_at_least_one_email_attempt_is_required():
    with pytest.raises(ValidationError) as invalid:
        PolicyVersionFactory.build(email_attempt_limit=0).clean()

    assert list(invalid.value.message_dict) == ["email_attempt_limit"]


def test_a_reset_may_live_at_most_a_day_under_any_policy():
    policy = PolicyVersionFactory.build(max_lifetime=LONGEST_LIFETIME + timedelta(seconds=1))

    with pytest.raises(ValidationError) as invalid:
        policy.clean()

    assert invalid.value.message_dict == {"max_lifetime": ["max_lifetime must be at most 24 hours"]}


def test_a_policy_may_allow_exactly_a_day(db):
    PolicyVersionFactory.build(max_lifetime=timedelta(hours=24)).full_clean(exclude=["number"])
