"""Run the real worker step against the provider simulator, on a fake clock."""

import itertools
from datetime import datetime, timedelta

from django.conf import settings

from notify import worker
from notify.messages import message_id
from notify.models import Event
from notify.rules.vocabulary import NextAction
from notify.transports.base import SmsMessage, UnknownOutcome
from tests.factories import new_event

# Valid, fictional US numbers: one per event, so a simulator script applies to one event only.
_numbers = (f"+1415555{n:04d}" for n in itertools.count(100))


def next_phone() -> str:
    return next(_numbers)


def scripted_event(
    simulator, clock, *, create=("accept",), statuses=(("sent", 0), ("delivered", 0)), smtp=("accept",), **fields
):
    """Create an event whose SMS and email the simulator answers as scripted.

    The email is scripted too (accepted, unless ``smtp`` says otherwise): left to the simulator's
    profile, it would draw its answer from the profile's faults (a 451 about once in a hundred),
    and which test drew the fault would change with every test added before it.
    """
    phone = next_phone()
    # Callbacks are dropped: these tests drive the worker alone (polling); callbacks have their own.
    simulator.control.script_sms(phone, create=list(create), statuses=[list(s) for s in statuses], callbacks="drop")
    # Script the address the event really uses: a caller may name its own (a canary, say), and an
    # unscripted address would get the profile's faults after all. The last step repeats, so
    # events sharing an address and a script get the same answers.
    email = fields.pop("email", f"subscriber.{phone[1:]}@example.org")
    if email:  # "": an event without an email
        simulator.control.script_email(email, smtp=list(smtp))
    return new_event(clock.now(), phone=phone, email=email, **fields)


def step(event_id, transports, clock, *, owner="worker-1", **options):
    return worker.step_event(event_id, transports=transports, clock=clock, owner=owner, **options)


def run_until_settled(event_id, transports, clock, *, max_steps=200):
    """Step the event, jumping the fake clock to each next due time, until nothing is left to do."""
    for _ in range(max_steps):
        step(event_id, transports, clock)
        event = Event.objects.get(pk=event_id)
        if event.next_action == NextAction.NONE:
            return event
        if event.next_action_at > clock.now():
            clock.advance((event.next_action_at - clock.now()).total_seconds())
        else:
            # Due, yet not done: another worker holds the lease. Wait for it to expire.
            clock.advance(1)
    raise AssertionError(f"{event_id} still open after {max_steps} steps: {event.state}, next {event.next_action}")


def sms_count(simulator, event_id) -> int:
    return int(simulator.control.counts()["sms"].get(event_id, 0))


def email_count(simulator, event_id) -> int:
    event = Event.objects.select_related("policy").get(pk=event_id)
    key = message_id(event_id, event.policy.email_from)
    return int(simulator.control.counts()["email"].get(key, 0))


class SlowTwilio:
    """Twilio slower than our client: each create times out on our side (after ``timeout``
    seconds of the fake clock) while Twilio goes on processing it; the message is created, and
    listed, ``accept_after`` seconds after the create came in. ``horizon`` is the transport's
    processing horizon (Twilio's production one by default)."""

    def __init__(self, inner, clock, *, accept_after: float, timeout: float = 0.0, horizon=None) -> None:
        self._inner, self._clock = inner, clock
        self._accept_after, self._timeout = timedelta(seconds=accept_after), timeout
        self.absence_horizon = horizon or settings.TWILIO_PROCESSING_HORIZON
        self._processing: list[tuple[datetime, SmsMessage]] = []
        self.sids: list[str] = []

    def submit(self, message):
        self._processing.append((self._clock.now() + self._accept_after, message))
        self._clock.advance(self._timeout)
        raise UnknownOutcome("no_response", "ReadTimeout")

    def finish_processing(self) -> None:
        """Create the messages whose processing is over by now."""
        now = self._clock.now()
        done = [message for at, message in self._processing if at <= now]
        self._processing = [(at, message) for at, message in self._processing if at > now]
        self.sids += [self._inner.submit(message).provider_ref for message in done]

    def finish_now(self) -> None:
        """Create every message still being processed, now."""
        self.sids += [self._inner.submit(message).provider_ref for _, message in self._processing]
        self._processing = []

    def fetch(self, provider_ref):
        self.finish_processing()
        return self._inner.fetch(provider_ref)

    def find(self, message, since, neighbours):
        self.finish_processing()
        return self._inner.find(message, since, neighbours)
