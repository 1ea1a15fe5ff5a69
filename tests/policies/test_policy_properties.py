"""Any policy that validates leaves a positive action budget at the shortest accepted expiry."""

from datetime import timedelta

from hypothesis import given
from hypothesis import strategies as st

from notify.rules import machine
from notify.rules.machine import EventSnapshot
from notify.rules.vocabulary import State
from policies.models import DURATION_FIELDS
from tests.conftest import T0
from tests.factories import PolicyVersionFactory

seconds = st.integers(min_value=1, max_value=3600).map(lambda s: timedelta(seconds=s))


@st.composite
def valid_durations(draw):
    """Positive durations with a fallback reserve that covers email submit + record: the valid space."""
    durations = draw(st.fixed_dictionaries(dict.fromkeys(DURATION_FIELDS, seconds)))
    spare = draw(st.integers(min_value=0, max_value=3600))
    durations["fallback_reserve"] = durations["email_submit_cost"] + durations["record_cost"] + timedelta(seconds=spare)
    return durations


STARTS = [(State.SMS_REQUESTED, True), (State.SMS_REQUESTED, False), (State.EMAIL_CLAIMED, False)]


@given(durations=valid_durations(), start=st.sampled_from(STARTS))
def test_a_valid_policy_leaves_budget_at_the_minimum_accepted_expiry(durations, start):
    policy = PolicyVersionFactory.build(**durations)
    policy.clean()  # the generated space is exactly the valid one
    state, fallback = start
    # create_event accepts a lifetime strictly longer than the minimum: the shortest is 1 µs more.
    lifetime = machine.minimum_lifetime(policy, state, fallback) + timedelta(microseconds=1)
    event = EventSnapshot(
        state=state,
        created_at=T0,
        expires_at=T0 + lifetime,
        state_entered_at=T0,
        last_observation_at=None,
        fallback_available=fallback,
    )

    deadline = machine.act_by(event, policy)
    assert deadline is not None
    assert deadline > T0
    if fallback:
        assert machine.fallback_deadline(event, policy) > T0
