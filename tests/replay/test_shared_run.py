"""The fast path: records replayed together share each policy's opening (``simulate.Shared``).

Every record with the same policy and reset lifetime is created the same way and begins its first
submit at the same moment, so a run makes those two decisions once and shares them. Sharing must
change no outcome: each record replayed in one shared run ends exactly as it ends replayed alone,
step by step from a fresh start, whatever records came before it in the run.
"""

from datetime import timedelta

from hypothesis import given
from hypothesis import strategies as st

from policies.models import ChannelPlan
from runbook.replay.simulate import EPOCH, Shared, simulate
from runbook.replay.timings import EMAIL_ANSWERS, RECEIPTS, SMS_ANSWERS, Call, Timing
from tests.factories import PolicyVersionFactory

# Fewer lifetimes than records, so records share openings; 120 s puts the fallback deadline at the start.
LIFETIMES_S = (120.0, 300.0, 600.0, 900.0)
# Up to 40 s: past the client's timeout and the email's send deadline, so unknown outcomes occur.
LATENCIES_S = st.floats(min_value=0, max_value=40, allow_nan=False).map(lambda seconds: round(seconds, 3))

POLICIES = [
    PolicyVersionFactory.build(pk=1, channel_plan=ChannelPlan.SMS_THEN_EMAIL),
    PolicyVersionFactory.build(pk=2, channel_plan=ChannelPlan.SMS_ONLY),
    PolicyVersionFactory.build(pk=3, channel_plan=ChannelPlan.EMAIL_ONLY),
    PolicyVersionFactory.build(pk=4, poll_interval=timedelta(seconds=3), sms_budget=timedelta(seconds=20)),
]


def calls(answers: tuple[str, ...]) -> st.SearchStrategy[tuple[Call, ...]]:
    return st.lists(st.builds(Call, LATENCIES_S, st.sampled_from(answers)), max_size=3).map(tuple)


@st.composite
def records(draw: st.DrawFn) -> Timing:
    outcome = draw(st.sampled_from(["delivered", "failed", "none"]))
    return Timing(
        region="US",
        lifetime_s=draw(st.sampled_from(LIFETIMES_S)),
        sms_accept_s=draw(LATENCIES_S),
        sms_terminal_s=None if outcome == "none" else draw(st.floats(0, 400).map(lambda s: round(s, 3))),
        sms_outcome=outcome,
        email_accept_s=draw(LATENCIES_S),
        email_outcome=draw(st.sampled_from(["accepted", "failed"])),
        sms_receipt=draw(st.sampled_from(RECEIPTS)),
        sms_calls=draw(calls(SMS_ANSWERS)),
        email_calls=draw(calls(EMAIL_ANSWERS)),
    )


@given(st.lists(st.tuples(st.sampled_from(range(len(POLICIES))), records()), min_size=1, max_size=30))
def test_a_record_replayed_in_a_shared_run_ends_as_it_does_replayed_alone(replayed):
    shared = Shared()
    for index, record in replayed:
        policy = POLICIES[index]
        assert simulate(record, policy, shared) == simulate(record, policy), (policy.channel_plan, record)
    # The run did share: one opening per policy and lifetime, each with the first submit it began.
    assert set(shared.openings) == {(id(POLICIES[index]), record.lifetime_s) for index, record in replayed}
    for opening in shared.openings.values():
        assert all(now == EPOCH for _, _, now in opening.submits)


def test_records_of_one_policy_and_lifetime_share_one_opening_and_one_first_submit():
    shared, policy = Shared(), POLICIES[0]
    first = Timing("US", 600.0, 0.4, 5.0, "delivered", 1.0, "accepted")
    second = Timing("US", 600.0, 2.5, None, "none", 1.2, "accepted")
    simulate(first, policy, shared)
    [opening] = shared.openings.values()
    [begun] = opening.submits.values()
    simulate(second, policy, shared)
    assert list(shared.openings.values()) == [opening]
    assert list(opening.submits.values()) == [begun]
