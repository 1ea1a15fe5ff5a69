"""The fast path: records replayed together share the points they reach alike (``simulate.Shared``).

Every record with the same policy and reset lifetime is created the same way and begins its first
submit at the same moment; records whose provider answered at the same moment reach the same point
after it, and so on. A run makes each shared point's decisions once. Sharing must change no
outcome: each record replayed in one shared run ends exactly as it ends replayed alone, step by
step from a fresh start, whatever records came before it in the run, however many points it keeps.
"""

from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from notify.rules.plan import ObservationInput
from notify.rules.vocabulary import Channel, Normalized, Source, State
from policies.models import ChannelPlan, PolicyVersion
from runbook.replay.simulate import EPOCH, POINT_LIMIT, Shared, simulate, trace
from runbook.replay.timings import EMAIL_ANSWERS, RECEIPTS, SMS_ANSWERS, Call, Timing
from tests.factories import PolicyVersionFactory

# Fewer lifetimes than records, so records share openings; 120 s puts the fallback deadline at the start.
LIFETIMES_S = (120.0, 300.0, 600.0, 900.0)
# Up to 40 s: past the client's timeout and the email's send deadline, so unknown outcomes occur.
# Half of them from a few values, so records in one run answer at the same moments and share steps.
LATENCIES_S = st.one_of(
    st.sampled_from([0.2, 0.5, 12.0, 31.0]),
    st.floats(min_value=0, max_value=40, allow_nan=False).map(lambda seconds: round(seconds, 3)),
)

# Receipts too, so records go on sharing past their receipt (an SMS failure, then the email's steps).
TERMINALS_S = st.one_of(st.sampled_from([4.0, 45.0, 130.0]), st.floats(0, 400).map(lambda seconds: round(seconds, 3)))

POLICIES = [
    PolicyVersionFactory.build(pk=1, channel_plan=ChannelPlan.SMS_THEN_EMAIL),
    PolicyVersionFactory.build(pk=2, channel_plan=ChannelPlan.SMS_ONLY),
    PolicyVersionFactory.build(pk=3, channel_plan=ChannelPlan.EMAIL_ONLY),
    PolicyVersionFactory.build(pk=4, poll_interval=timedelta(seconds=3), sms_budget=timedelta(seconds=20)),
]


def calls(answers: tuple[str, ...]) -> st.SearchStrategy[tuple[Call, ...]]:
    return st.lists(st.builds(Call, LATENCIES_S, st.sampled_from(answers)), max_size=3).map(tuple)


@st.composite
def records(draw: st.DrawFn, lifetime_s: float) -> Timing:
    outcome = draw(st.sampled_from(["delivered", "failed", "none"]))
    return Timing(
        region="US",
        lifetime_s=lifetime_s,
        sms_accept_s=draw(LATENCIES_S),
        sms_terminal_s=None if outcome == "none" else draw(TERMINALS_S),
        sms_outcome=outcome,
        email_accept_s=draw(LATENCIES_S),
        email_outcome=draw(st.sampled_from(["accepted", "failed"])),
        sms_receipt=draw(st.sampled_from(RECEIPTS)),
        sms_calls=draw(calls(SMS_ANSWERS)),
        email_calls=draw(calls(EMAIL_ANSWERS)),
    )


@st.composite
def runs(draw: st.DrawFn) -> list[tuple[PolicyVersion, Timing]]:
    """Records of a few policy-and-lifetime families, interleaved as a history has them: records of
    one family share their opening, and those answered alike at the same moment share more."""
    family = st.tuples(st.sampled_from(POLICIES), st.sampled_from(LIFETIMES_S))
    families = draw(st.lists(family, min_size=1, max_size=3))
    member = st.sampled_from(families).flatmap(lambda family: st.tuples(st.just(family[0]), records(family[1])))
    return draw(st.lists(member, min_size=2, max_size=60))


# More examples than the default: a mistake in sharing shows only where two records of one family
# meet at a point, and a run of few records often has no such pair.
@settings(max_examples=400, deadline=None)
@given(runs(), st.sampled_from([0, 3, POINT_LIMIT]))
def test_a_record_replayed_in_a_shared_run_ends_as_it_does_replayed_alone(replayed, point_limit):
    shared = Shared(point_limit=point_limit)
    for policy, record in replayed:
        # Every step alike (the event with every time in it, the decision, the moment), and the outcome.
        assert trace(record, policy, shared) == trace(record, policy, Shared()), (policy.channel_plan, record)
    # The run did share: one opening per policy and lifetime, and no more points than its limit.
    assert set(shared.openings) == {(id(policy), record.lifetime_s) for policy, record in replayed}
    assert shared.points <= point_limit


def test_records_answered_at_the_same_moment_share_the_point_after_the_answer():
    shared, policy = Shared(), POLICIES[0]
    first = Timing("US", 600.0, 0.4, 5.0, "delivered", 1.0, "accepted")
    second = Timing("US", 600.0, 0.4, 7.5, "delivered", 1.2, "accepted")
    simulate(first, policy, shared)
    kept = shared.points
    simulate(second, policy, shared)
    [opening] = shared.openings.values()
    [submitted] = opening.steps.values()  # the first submit, begun at the start
    [(answer, answered)] = submitted.to.steps.items()
    assert answer == (ObservationInput(Channel.SMS, Source.SUBMIT, Normalized.ACCEPTED), EPOCH + timedelta(seconds=0.4))
    assert answered.to.loaded.event.state == State.SMS_PENDING
    # The second record took both steps as the first did, and kept nothing new: its delivery,
    # at a moment of its own, ends at a terminal point, which is never kept.
    assert shared.points == kept == 2


def test_a_run_keeps_no_more_points_than_its_limit():
    shared, policy = Shared(point_limit=1), POLICIES[0]
    for accepted_s in (0.4, 0.7, 1.1):
        simulate(Timing("US", 600.0, accepted_s, 5.0, "delivered", 1.0, "accepted"), policy, shared)
    [opening] = shared.openings.values()
    [submitted] = opening.steps.values()
    assert shared.points == 1
    assert submitted.to.steps == {}
