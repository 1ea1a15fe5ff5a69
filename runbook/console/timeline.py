"""The event's timeline as geometry for a server-side SVG (no script, nothing for CSP to allow).

Three lanes (workflow, SMS, email) on one time axis from the event's creation to its
expiry (or the latest thing that happened, if later), with vertical marks for the
fallback deadline, ``act_by``, the expiry and "now".
"""

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from notify.models import Claim, Event, Observation, Transition
from notify.rules import machine
from notify.rules.vocabulary import Channel
from policies.models import PolicyVersion
from runbook.console import wording

RIGHT = 24
LABEL_ROW = 14
CHAR_WIDTH = 6.2  # an estimate for the 11px sans-serif labels, to keep them from overlapping
LANE_GAP = 34


@dataclass(frozen=True)
class Layout:
    """The canvas a timeline is laid out on. A phone gets its own narrow layout, positions and
    label rows computed for it, so its labels keep their size instead of shrinking with a wide one."""

    kind: str
    width: int
    left: int  # room for the lane names


WIDE = Layout("wide", 960, 90)
NARROW = Layout("narrow", 360, 64)


@dataclass(frozen=True)
class Mark:
    """A vertical line across the lanes, labelled at the top."""

    x: float
    label: str
    kind: str
    label_y: float
    title: str


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    kind: str
    title: str


@dataclass(frozen=True)
class Label:
    x: float
    y: float
    text: str


@dataclass(frozen=True)
class Lane:
    name: str
    y: float


@dataclass(frozen=True)
class Timeline:
    kind: str
    width: int
    height: int
    left: int
    right: float
    lanes: list[Lane]  # workflow, sms, email
    marks: list[Mark]
    points: list[Point]
    labels: list[Label]
    now_beyond: str  # set when "now" is far past the axis; the axis then ends with an arrow


def build(
    event: Event,
    policy: PolicyVersion,
    claims: Mapping[Channel, Claim],
    observations: Sequence[Observation],
    transitions: Sequence[Transition],
    now: datetime,
    layout: Layout = WIDE,
) -> Timeline:
    start = event.created_at
    happened = [start, *(o.recorded_at for o in observations), *(t.at for t in transitions)]
    end = max(event.expires_at, *happened)
    # Long after the event, "now" would squash everything to the left edge: stop the axis.
    lifetime = event.expires_at - start
    now_on_axis = now <= end + lifetime / 4
    if now_on_axis:
        end = max(end, now)
    span = max((end - start).total_seconds(), 1.0)
    left, right = layout.left, layout.width - RIGHT

    def x(at: datetime) -> float:
        return round(left + (at - start).total_seconds() / span * (right - left), 1)

    vertical = _vertical_marks(event, policy, now if now_on_axis else None)
    mark_rows = _stagger([(x(at), label) for at, label, _, _ in vertical])
    moved = [t for t in transitions if t.from_state]
    transition_rows = _stagger([(x(t.at), t.to_state) for t in moved])
    # The workflow lane's state names hang below it, as many rows as they need; the
    # channel lanes start below the last row, so a burst of transitions never covers them.
    workflow_y = LABEL_ROW * (max(mark_rows, default=0) + 1) + 24
    sms_y = workflow_y + 16 + 11 * (max(transition_rows, default=-1) + 1) + 12
    lanes = [Lane("workflow", workflow_y), Lane(Channel.SMS, sms_y), Lane(Channel.EMAIL, sms_y + LANE_GAP)]
    lane_y = {lane.name: lane.y for lane in lanes}
    marks = [
        Mark(x(at), label, kind, LABEL_ROW * (row + 1), f"{title} {at:%H:%M:%S} UTC")
        for (at, label, kind, title), row in zip(vertical, mark_rows, strict=True)
    ]

    points = [Point(x(start), workflow_y, "created", f"created {start:%H:%M:%S} UTC")]
    labels = []
    for transition, row in zip(moved, transition_rows, strict=True):
        points.append(Point(x(transition.at), workflow_y, "transition", _title(transition)))
        labels.append(Label(x(transition.at), workflow_y + 16 + row * 11, transition.to_state))
    sms = claims.get(Channel.SMS)
    if sms is not None and sms.submitted_at is not None:
        title = f"SMS submitted {sms.submitted_at:%H:%M:%S} UTC"
        points.append(Point(x(sms.submitted_at), lane_y[Channel.SMS], "submit", title))
    email = claims.get(Channel.EMAIL)
    if email is not None:
        title = f"email fallback claimed {email.created_at:%H:%M:%S} UTC"
        points.append(Point(x(email.created_at), lane_y[Channel.EMAIL], "claim", title))
    points.extend(_observation_point(o, x(o.recorded_at), lane_y[o.channel]) for o in observations)
    height = int(lanes[-1].y + 28)
    now_beyond = "" if now_on_axis else f"now: {_ago(now - end)} after the axis ends"
    return Timeline(layout.kind, layout.width, height, left, right, lanes, marks, points, labels, now_beyond)


def _vertical_marks(event: Event, policy: PolicyVersion, now: datetime | None) -> list[tuple[datetime, str, str, str]]:
    marks: list[tuple[datetime, str, str, str]] = []
    if event.fallback_available:
        marks.append((machine.fallback_deadline(event, policy), "fallback D", "deadline", "fallback deadline"))
    if event.act_by is not None:
        marks.append((event.act_by, "act by", "act-by", "act by (action budget runs out)"))
    marks.append((event.expires_at, "expiry", "expiry", "reset link expires"))
    if now is not None:
        marks.append((now, "now", "now", "now"))
    return sorted(marks)


def _stagger(items: Iterable[tuple[float, str]]) -> list[int]:
    """Give each label (x, text), in x order, the first row where it overlaps nothing."""
    row_ends: list[float] = []
    rows = []
    for at, text in items:
        width = len(text) * CHAR_WIDTH
        left = at - width / 2
        row = next((index for index, end in enumerate(row_ends) if end + 4 < left), len(row_ends))
        if row == len(row_ends):
            row_ends.append(0.0)
        row_ends[row] = at + width / 2
        rows.append(row)
    return rows


def _title(transition: Transition) -> str:
    return (
        f"{transition.from_state} → {transition.to_state} at {transition.at:%H:%M:%S} UTC "
        f"({transition.cause}, {transition.actor})"
    )


def _observation_point(observation: Observation, x: float, y: float) -> Point:
    """A point styled by what the observation means (its outcome kind), titled in the same words."""
    said = wording.of(observation)
    title = f"{observation.channel} {observation.source}: {said.label} at {observation.recorded_at:%H:%M:%S} UTC"
    return Point(x, y, f"obs-{said.kind}", title)


def _ago(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    if seconds < 3600:
        return f"{seconds // 60}m"
    if seconds < 86400:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"
