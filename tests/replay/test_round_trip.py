"""History round-trips: generated provider behaviour, driven through the live worker on a fake clock,
exported from the claims and observations it left, and replayed from the file, ends the same way.

Unlike ``test_agreement`` (records written by hand, calls taking no time), the histories here are
generated: every call takes time, Twilio may accept a create only after our client gave up on it
(slower than TWILIO_TIMEOUT: lookups settle it), SMS creates are refused (429) before an answer, the relay defers
emails (451) before an answer or until the policy gives up, and receipts come by callback or, their
callback lost, only by polling. Export and replay must tell exactly what the live system did.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

import pytest
from django.conf import settings
from django.test import Client
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from notify.models import Claim, Event, Transition
from notify.rules.vocabulary import Channel, NextAction
from notify.transports import Transports
from notify.transports.base import Receipt
from notify.transports.twilio_sms import normalize
from runbook.replay import timings
from runbook.replay.export import export
from runbook.replay.simulate import simulate
from tests.factories import new_event
from tests.notify.helpers import post_status
from tests.notify.workers import SlowTwilio, next_phone, step

pytestmark = pytest.mark.django_db(transaction=True)

# Whole milliseconds: the timing format keeps three decimals, so the file loses nothing.
LATENCIES_MS = st.integers(min_value=50, max_value=3000)


@dataclass(frozen=True)
class History:
    sms_answers: tuple[str, ...]  # the simulator's answers to each create, in order
    sms_latencies_ms: tuple[int, ...]
    # Seconds after the acceptance, Twilio's final status, and whether its callback was lost.
    receipt: tuple[int, str, bool] | None
    smtp_answers: tuple[str, ...]  # the relay's answers to each DATA, in order
    email_latencies_ms: tuple[int, ...]
    lifetime_s: int
    # Twilio slower than our client: the accepted create is created this many seconds after it came
    # in, past TWILIO_TIMEOUT (our call gives up, lookups settle it) and within the processing horizon.
    accepted_late_s: int | None = None


@st.composite
def histories(draw: st.DrawFn) -> History:
    sms_answers = ("rate_limited",) * draw(st.integers(0, 2)) + (draw(st.sampled_from(["accept", "reject"])),)
    receipt = draw(
        st.none()
        | st.tuples(st.integers(1, 150), st.sampled_from(["delivered", "undelivered"]), st.booleans())
    )  # fmt: skip
    # Three deferrals reach the factory policy's attempt limit (3): the email is given up.
    smtp_answers = ("temp_fail",) * draw(st.integers(0, 3)) + (draw(st.sampled_from(["accept", "perm_fail"])),)
    return History(
        sms_answers=sms_answers,
        sms_latencies_ms=tuple(draw(LATENCIES_MS) for _ in sms_answers),
        receipt=receipt,
        smtp_answers=smtp_answers,
        email_latencies_ms=tuple(draw(LATENCIES_MS) for _ in smtp_answers),
        lifetime_s=draw(st.sampled_from([180, 600])),
        accepted_late_s=draw(st.none() | st.integers(11, 45)) if sms_answers[-1] == "accept" else None,
    )


class TimedSms:
    """The simulator's Twilio on the fake clock: each create takes its latency, and a receipt whose
    callback was lost shows in the message's status from its time on (only a poll can find it)."""

    def __init__(self, inner, clock, history: History) -> None:
        self._inner, self._clock, self._history = inner, clock, history
        # The production transport's horizon, the one replay models (the simulator's is shorter).
        self.absence_horizon = settings.TWILIO_PROCESSING_HORIZON
        self.receipt_at: datetime | None = None
        self._calls = 0
        # The accepted create, when Twilio takes longer than our client waits (SlowTwilio).
        self.late: SlowTwilio | None = None

    def submit(self, message):
        last = self._calls == len(self._history.sms_answers) - 1
        late = self._history.accepted_late_s if last else None
        if late is not None:
            self.late = SlowTwilio(self._inner, self._clock, accept_after=late, timeout=settings.TWILIO_TIMEOUT)
            self._calls += 1
            if self._history.receipt is not None:
                self.receipt_at = self._clock.now() + timedelta(seconds=late + self._history.receipt[0])
            return self.late.submit(message)  # times out on our side; Twilio creates it later
        self._clock.advance(self._history.sms_latencies_ms[self._calls] / 1000)
        self._calls += 1
        receipt = self._inner.submit(message)  # a refusal raises, as the real adapter does
        if self._history.receipt is not None and self.receipt_at is None:
            self.receipt_at = self._clock.now() + timedelta(seconds=self._history.receipt[0])
        return receipt

    def sid(self, known: str) -> str:
        """The message's id for its callback: Twilio's own, though our event may not know it yet."""
        if self.late is None:
            return known
        self.late.finish_processing()
        return self.late.sids[0]

    def fetch(self, provider_ref):
        receipt = (self.late or self._inner).fetch(provider_ref)
        planned = self._history.receipt
        if planned is not None and planned[2] and self.receipt_at is not None and self._clock.now() >= self.receipt_at:
            return Receipt(normalize(planned[1]), planned[1], provider_ref=provider_ref)
        return receipt

    def find(self, message, since, neighbours):
        return (self.late or self._inner).find(message, since, neighbours)


class TimedEmail:
    """The simulator's relay on the fake clock: each message's exchange takes its latency."""

    def __init__(self, inner, clock, latencies_ms: tuple[int, ...]) -> None:
        self._inner, self._clock, self._latencies_ms = inner, clock, latencies_ms
        self._calls = 0

    def send(self, message, *, within):
        self._clock.advance(self._latencies_ms[self._calls] / 1000)
        self._calls += 1
        return self._inner.send(message, within=within)


def live(history: History, simulator, transports, clock) -> Event:
    """Drive one history through the real worker; a receipt not lost arrives as a signed callback."""
    phone = next_phone()
    email = f"subscriber.{phone[1:]}@example.org"
    simulator.control.script_sms(phone, create=list(history.sms_answers), statuses=[["sent", 0]], callbacks="drop")
    simulator.control.script_email(email, smtp=list(history.smtp_answers))
    sms = TimedSms(transports.sms, clock, history)
    timed = Transports(sms, TimedEmail(transports.email, clock, history.email_latencies_ms))
    event = new_event(clock.now(), phone=phone, email=email, ttl=timedelta(seconds=history.lifetime_s))
    callbacks, called_back = Client(), False
    for _ in range(300):
        current = Event.objects.get(pk=event.id)
        due = current.next_action_at if current.next_action != NextAction.NONE else None
        planned = None if called_back else history.receipt
        if (
            planned is not None
            and not planned[2]
            and sms.receipt_at is not None
            and (due is None or sms.receipt_at <= due)
        ):
            clock.advance(max(0.0, (sms.receipt_at - clock.now()).total_seconds()))
            sid = sms.sid(Claim.objects.get(event=event, channel=Channel.SMS).provider_ref)
            assert post_status(callbacks, event.id, planned[1], sid=sid).status_code == 204
            called_back = True
            continue
        if due is None:
            return Event.objects.get(pk=event.id)
        clock.advance(max(0.0, (due - clock.now()).total_seconds()))
        step(event.id, timed, clock, max_actions=1)
    raise AssertionError(f"{history} did not settle")


@dataclass(frozen=True)
class Ended:
    final_state: str
    claimed_at_ms: int | None  # after creation
    claims: dict[str, str]
    sms_attempts: int


def ended_live(event: Event) -> Ended:
    claimed = Transition.objects.filter(event=event, to_state="email_claimed", from_state__gt="").first()
    claims = {claim.channel: claim for claim in Claim.objects.filter(event=event)}
    return Ended(
        final_state=event.state,
        claimed_at_ms=round((claimed.at - event.created_at).total_seconds() * 1000) if claimed else None,
        claims={channel: claim.state for channel, claim in claims.items()},
        sms_attempts=claims[Channel.SMS].attempts,
    )


def ended_in_replay(record: timings.Timing, policy) -> Ended:
    outcome = simulate(record, policy)
    return Ended(
        final_state=outcome.final_state,
        claimed_at_ms=round(outcome.claimed_at * 1000) if outcome.claimed_at is not None else None,
        claims={str(channel): state for channel, state in outcome.claims.items()},
        sms_attempts=outcome.sms_attempts,
    )


@hypothesis_settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(history=histories())
def test_a_history_exported_and_replayed_ends_as_it_did_live(history, policy, simulator, transports, clock, tmp_path):
    Event.objects.all().delete()  # one history at a time in the export
    event = live(history, simulator, transports, clock)

    path = tmp_path / "timings.csv"
    timings.write(path, export(event.created_at))
    [record] = timings.read(path)

    assert ended_in_replay(record, policy) == ended_live(event)
