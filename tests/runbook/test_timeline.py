"""The SVG timeline's layout: marks in time order, labels that do not overlap, a bounded axis."""

from datetime import timedelta

import pytest

from notify.models import Claim, Observation, Transition
from notify.rules import plan
from notify.rules.plan import ObservationInput
from notify.rules.vocabulary import Channel, Normalized, Source, State
from runbook.console import timeline
from tests.factories import new_event
from tests.runbook.events import event_in, record, sms_submitting


def _build(event, now):
    event.refresh_from_db()
    claims = {Channel(claim.channel): claim for claim in Claim.objects.filter(event=event)}
    observations = list(Observation.objects.filter(event=event).order_by("recorded_at"))
    transitions = list(Transition.objects.filter(event=event).order_by("version"))
    return timeline.build(event, event.policy, claims, observations, transitions, now)


def test_marks_sit_at_their_times_along_the_axis(policy, clock):
    event = new_event(clock.now(), ttl=timedelta(seconds=600))
    drawn = _build(event, clock.now() + timedelta(seconds=300))
    x = {mark.kind: mark.x for mark in drawn.marks}
    # Axis: creation at LEFT to expiry at the right edge; now half-way, D at 60 s, act_by 9 s before expiry.
    assert x["expiry"] == drawn.right
    assert x["now"] == round(timeline.WIDE.left + (drawn.right - timeline.WIDE.left) / 2, 1)
    assert x["deadline"] < x["now"] < x["act-by"] < x["expiry"]


def test_labels_that_would_overlap_go_to_separate_rows():
    rows = timeline._stagger([(100.0, "act by"), (104.0, "expiry"), (400.0, "now")])
    assert rows == [0, 1, 0]


def test_long_after_the_event_the_axis_stops_and_says_where_now_is(policy, clock):
    event = event_in(State.SMS_DELIVERED, clock)
    drawn = _build(event, clock.now() + timedelta(days=2))
    assert "now" not in {mark.kind for mark in drawn.marks}
    assert drawn.now_beyond == "now: 1d after the axis ends"


def test_a_terminal_event_has_no_act_by_mark(policy, clock):
    event = event_in(State.SMS_DELIVERED, clock)
    kinds = {mark.kind for mark in _build(event, clock.now()).marks}
    assert "act-by" not in kinds
    assert {"deadline", "expiry", "now"} <= kinds


def test_every_observation_is_a_point_on_its_channels_lane(policy, clock):
    event = event_in(State.EMAIL_ACCEPTED, clock)
    drawn = _build(event, clock.now())
    lanes = {lane.name: lane.y for lane in drawn.lanes}
    observation_points = [point for point in drawn.points if point.kind.startswith("obs-")]
    assert [(point.kind, point.y) for point in observation_points] == [
        ("obs-rejected", lanes["sms"]),
        ("obs-accepted", lanes["email"]),
    ]
    assert any(point.kind == "claim" and point.y == lanes["email"] for point in drawn.points)


def test_a_burst_of_transitions_pushes_the_channel_lanes_down_instead_of_covering_them(policy, clock):
    event = event_in(State.EMAIL_ACCEPTED, clock)  # three transitions in the same second
    drawn = _build(event, clock.now())
    lanes = {lane.name: lane.y for lane in drawn.lanes}
    assert len({label.y for label in drawn.labels}) == len(drawn.labels) == 3
    assert max(label.y for label in drawn.labels) < lanes["sms"] - 8


def _observation_points(drawn):
    return [point for point in drawn.points if point.kind.startswith("obs-")]


def test_a_lost_email_send_and_a_fallback_without_useful_life_are_points_of_their_own_kind(policy, clock):
    event = event_in(State.EMAIL_CLAIMED, clock)
    lost = ObservationInput(Channel.EMAIL, Source.RECOVERY, Normalized.POSSIBLE_DUPLICATE, "holder_lost")
    record(event.id, lost, clock.now())
    clock.advance(5)
    record(event.id, plan.NO_USEFUL_LIFE, clock.now())
    drawn = _build(event, clock.now())
    email_lane = {lane.name: lane.y for lane in drawn.lanes}["email"]
    assert [(point.kind, point.y, point.title) for point in _observation_points(drawn)][1:] == [
        ("obs-possible_duplicate", email_lane, "email recovery: possible duplicate at 12:00:00 UTC"),
        ("obs-no_useful_life", email_lane, "email submit: fallback without useful life (not sent) at 12:00:05 UTC"),
    ]


@pytest.mark.parametrize(
    ("raw_status", "kind", "title"),
    [
        ("not_listed_yet", "obs-not_listed_yet", "sms recovery: unresolved: not listed yet at 12:00:00 UTC"),
        ("lookup_ambiguous", "obs-lookup_ambiguous", "sms recovery: unresolved: lookup ambiguous at 12:00:00 UTC"),
        ("lookup_redacted", "obs-lookup_redacted", "sms recovery: unresolved: absence unprovable at 12:00:00 UTC"),
        # A provider's own word (a 5xx on the lookup) says nothing more than "unknown".
        ("http_503", "obs-unknown_outcome", "sms recovery: unknown outcome at 12:00:00 UTC"),
    ],
)
def test_an_unresolved_sms_lookup_is_a_point_named_for_why_it_is_unresolved(policy, clock, raw_status, kind, title):
    event = sms_submitting(clock)
    lookup = ObservationInput(Channel.SMS, Source.RECOVERY, Normalized.UNKNOWN_OUTCOME, raw_status)
    record(event.id, lookup, clock.now())
    drawn = _build(event, clock.now())
    sms_lane = {lane.name: lane.y for lane in drawn.lanes}["sms"]
    assert [(point.kind, point.y, point.title) for point in _observation_points(drawn)] == [(kind, sms_lane, title)]


def test_a_refused_credential_is_a_point_of_its_own_kind(policy, clock):
    event = sms_submitting(clock)
    refused = ObservationInput(Channel.SMS, Source.SUBMIT, Normalized.CONFIGURATION_ERROR, "http_401_20003")
    record(event.id, refused, clock.now())
    (point,) = _observation_points(_build(event, clock.now()))
    assert (point.kind, point.title) == (
        "obs-configuration_error",
        "sms submit: provider refuses our credentials at 12:00:00 UTC",
    )
