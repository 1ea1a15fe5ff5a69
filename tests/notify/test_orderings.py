"""Property test: any interleaving of receipts, ticks, claims, expiry and two workers keeps the invariants.

Hypothesis drives one event per example through the real transition functions on
the test database: duplicate and out-of-order receipts, late receipts after the
email claim, polls racing callbacks, deadline ticks, and two workers whose leases
expire and get taken over. After every step the stored history is checked.
"""

import itertools
from datetime import timedelta

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from notify.models import Claim, Event, Transition
from notify.rules import machine
from notify.rules.plan import ObservationInput
from notify.rules.vocabulary import Cause, Channel, Effect, Normalized, Source, State
from notify.writes import intent, leases, moves
from tests.conftest import T0
from tests.factories import new_event
from tests.notify.helpers import claim, observe

TTL = timedelta(seconds=30)
WORKERS = st.sampled_from(["worker-a", "worker-b"])
CHANNELS = st.sampled_from(list(Channel))
STATUSES = st.sampled_from(list(Normalized))
SOURCES = st.sampled_from([Source.POLL, Source.CALLBACK, Source.RECOVERY, Source.SUBMIT])


class EventLifecycle(RuleBasedStateMachine):
    @initialize(fallback=st.booleans(), ttl=st.integers(min_value=121, max_value=900))
    def create(self, fallback, ttl):
        self.now = T0
        self.event = new_event(self.now, email="someone@example.org" if fallback else "", ttl=timedelta(seconds=ttl))
        self.leases: dict[str, leases.Lease] = {}
        self.terminal_state: str | None = None
        self.last_version = 1
        self.known = None  # the event as some earlier write left it: often stale, which must not matter

    def current(self) -> Event:
        return Event.objects.select_related("policy").get(pk=self.event.id)

    @rule(seconds=st.integers(min_value=0, max_value=90))
    def tick(self, seconds):
        self.now += timedelta(seconds=seconds)

    @rule(channel=CHANNELS, status=STATUSES, source=SOURCES)
    def receipt(self, channel, status, source):
        self.known = observe(self.event.id, channel, status, self.now, source=source).after

    @rule(channel=CHANNELS, status=STATUSES)
    def receipt_from_a_known_event(self, channel, status):
        if self.known is not None:
            observation = ObservationInput(channel=channel, source=Source.POLL, normalized=status)
            outcome = moves.record_observation(self.event.id, observation, now=self.now, actor="test", known=self.known)
            self.known = outcome.after

    @rule(status=STATUSES)
    def callback_from_a_known_event(self, status):
        # As the callback view reports: its one read serves the delivery's acceptance check and
        # its write, however stale that read is by the time the write lands.
        if self.known is not None:
            observation = ObservationInput(channel=Channel.SMS, source=Source.CALLBACK, normalized=status)
            outcome = moves.record_receipt(self.event.id, observation, now=self.now, actor="test", known=self.known)
            self.known = outcome.after

    @rule(channel=CHANNELS)
    def submit(self, channel):
        lease = leases.take(self.event.id, "submitter", at=self.now, ttl=TTL)
        if lease is not None:
            intent.begin_submit(self.event.id, channel, now=self.now, at=self.now, lease=lease)
            leases.give_back(self.event.id, lease)

    @rule(worker=WORKERS)
    def take_lease(self, worker):
        lease = leases.take(self.event.id, worker, at=self.now, ttl=TTL)
        if lease is not None:
            self.leases[worker] = lease

    @rule(worker=WORKERS)
    def release_lease(self, worker):
        if worker in self.leases:
            leases.give_back(self.event.id, self.leases.pop(worker))

    @rule(worker=WORKERS, channel=CHANNELS, status=STATUSES)
    def worker_observes(self, worker, channel, status):
        if worker in self.leases:
            self.as_holder(worker, lambda lease: observe(self.event.id, channel, status, self.now, lease=lease))

    @rule(worker=WORKERS)
    def worker_claims(self, worker):
        if worker in self.leases:
            self.as_holder(worker, lambda lease: claim(self.event.id, self.now, lease=lease))

    @rule(cause=st.sampled_from([Cause.DEADLINE, Cause.OBSERVATION, Cause.OPERATOR]))
    def claim_without_lease(self, cause):
        claim(self.event.id, self.now, cause=cause)

    @rule()
    def expire(self):
        moves.expire(self.event.id, now=self.now, actor="sweeper")

    def as_holder(self, worker, write):
        before = self.current()
        outcome = write(self.leases[worker])
        if outcome.effect == Effect.CONFLICT:
            # Fencing: only a holder whose token was bumped by a take-over is refused, and it wrote nothing.
            after = self.current()
            assert before.lease_token != self.leases[worker].token
            assert (after.state, after.version) == (before.state, before.version)

    @invariant()
    def history_follows_the_table_without_gaps(self):
        event = self.current()
        history = list(Transition.objects.filter(event=event).order_by("version"))
        assert [t.version for t in history] == list(range(1, event.version + 1))
        assert (history[0].from_state, history[0].to_state) == ("", State.SMS_REQUESTED)
        for previous, step in itertools.pairwise(history):
            assert step.from_state == previous.to_state
            assert step.to_state in machine.allowed_targets(State(step.from_state), event.fallback_available)
        assert history[-1].to_state == event.state

    @invariant()
    def version_only_grows(self):
        version = self.current().version
        assert version >= self.last_version
        self.last_version = version

    @invariant()
    def terminal_states_absorb(self):
        event = self.current()
        if self.terminal_state is not None:
            assert event.state == self.terminal_state
        elif machine.is_terminal(State(event.state), event.fallback_available):
            self.terminal_state = event.state

    @invariant()
    def at_most_one_claim_per_channel_and_email_only_when_allowed(self):
        event = self.current()
        claims = list(Claim.objects.filter(event=event).values_list("channel", flat=True))
        assert sorted(claims) == sorted(set(claims))
        into_email = Transition.objects.filter(event=event, to_state=State.EMAIL_CLAIMED).first()
        assert (Channel.EMAIL in claims) == (into_email is not None)
        if into_email is not None:
            deadline = machine.fallback_deadline(event, event.policy)
            assert into_email.from_state == State.SMS_FAILED or into_email.at >= deadline
            assert into_email.at < event.expires_at

    @invariant()
    def at_most_one_worker_holds_the_lease(self):
        event = self.current()
        live = [
            worker
            for worker, lease in self.leases.items()
            if lease.token == event.lease_token and event.lease_expires_at and event.lease_expires_at > self.now
        ]
        assert len(live) <= 1


def test_any_interleaving_keeps_the_invariants(db, policy):
    run_state_machine_as_test(
        EventLifecycle,
        settings=settings(
            max_examples=75,
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
