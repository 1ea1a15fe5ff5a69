"""create_event: one transaction before any outbound request, idempotent per client key."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from psycopg import _queries as psycopg_queries

from notify import vault
from notify.intake import EventRefused, Refusal
from notify.models import Claim, Event, Transition, VaultEntry
from notify.rules.vocabulary import Cause, Channel, ClaimState, NextAction, State
from notify.writes.create import create_event
from policies.models import ChannelPlan, Stage
from tests.factories import CANARY_EMAIL, CANARY_PHONE, CANARY_RESET_URL, PolicyVersionFactory, reset_request

PII = (CANARY_PHONE, CANARY_EMAIL, CANARY_RESET_URL)


def test_it_creates_the_event_its_sms_intent_vault_entry_and_first_transition(db, policy, clock):
    created = create_event(reset_request(), now=clock.now())

    event = created.event
    assert created.created
    assert event.id.startswith("evt_")
    assert (event.state, event.version, event.policy, event.region) == (State.SMS_REQUESTED, 1, policy, "US")
    assert (event.next_action, event.next_action_at) == (NextAction.SUBMIT_SMS, clock.now())
    assert event.act_by == event.expires_at - timedelta(seconds=9)
    sms = Claim.objects.get(event=event)
    assert (sms.channel, sms.key, sms.state) == (Channel.SMS, f"reset-sms:{event.id}", ClaimState.CLAIMED)
    first = Transition.objects.get(event=event)
    assert (first.from_state, first.to_state, first.version, first.cause) == ("", State.SMS_REQUESTED, 1, Cause.CREATED)


def test_it_keeps_personal_data_only_encrypted_in_the_vault(db, policy, clock):
    event = create_event(reset_request(), now=clock.now()).event

    sealed = bytes(VaultEntry.objects.get(event=event).ciphertext)
    row = {f.attname: getattr(event, f.attname) for f in Event._meta.concrete_fields}
    assert not any(secret.encode() in sealed for secret in PII)
    assert not any(secret in str(value) for secret in PII for value in row.values())
    opened = vault.unseal(sealed)
    assert (opened.phone, opened.email, opened.reset_url) == PII
    assert CANARY_PHONE not in repr(opened)


def test_it_correlates_recipients_by_a_keyed_hash_of_the_normalized_number(db, policy, clock):
    one = create_event(reset_request(phone="+1 (415) 555-0123"), now=clock.now()).event
    two = create_event(reset_request(), now=clock.now()).event

    assert one.sms_recipient_ref == two.sms_recipient_ref == vault.keyed_hash(CANARY_PHONE)


def test_the_same_request_twice_returns_the_same_event(db, policy, clock):
    request = reset_request(client_key="k-1")

    first = create_event(request, now=clock.now())
    again = create_event(request, now=clock.now() + timedelta(seconds=5))

    assert (first.created, again.created) == (True, False)
    assert again.event.id == first.event.id
    assert Claim.objects.count() == 1


def test_a_replay_is_answered_with_its_event_even_where_the_request_would_be_refused_now(db, policy, clock):
    # Answering a replay is not creating: time ran on, and the fixed expiry no longer leaves
    # a budget, yet the service retrying its request must learn of the event it made.
    request = reset_request(client_key="k-1", ttl=None, expires_at=clock.now() + timedelta(seconds=600))
    first = create_event(request, now=clock.now())

    again = create_event(request, now=clock.now() + timedelta(seconds=590))

    assert (again.created, again.event.id) == (False, first.event.id)


def test_a_first_request_is_written_without_looking_its_client_key_up(db, policy, clock):
    # The common case pays for no lookup: the INSERT itself finds a taken client key.
    with CaptureQueriesContext(connection) as statements:
        created = create_event(reset_request(), now=clock.now())

    assert created.created
    reads = [query["sql"] for query in statements.captured_queries if query["sql"].lstrip().startswith("SELECT")]
    assert not [sql for sql in reads if "notify_event" in sql]


@pytest.mark.postgres  # SQLite's path writes the rows one statement each
def test_a_first_request_is_one_statement_once_the_region_s_version_was_seen(db, policy, clock):
    # The common case pays for no lookup: the INSERT itself finds a taken client key, and
    # checks that the version this process last saw published still is.
    create_event(reset_request(), now=clock.now())

    with CaptureQueriesContext(connection) as statements:
        created = create_event(reset_request(), now=clock.now())

    assert created.created
    [insert] = [query["sql"] for query in statements.captured_queries]
    assert insert.lstrip().startswith("WITH parent AS (INSERT INTO notify_event")
    assert "policies_policyversion" in insert


@pytest.mark.postgres
def test_a_creation_s_statement_stays_within_what_psycopg_caches_the_parse_of(db, policy, clock):
    # psycopg keeps its parse of a statement only up to 50 parameters and 4,096 bytes; past
    # either, it parses the whole statement again on every creation. NULLs go in as text.
    create_event(reset_request(), now=clock.now())
    sent = []

    def capture(execute, sql, params, many, context):
        sent.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        create_event(reset_request(), now=clock.now())

    [(sql, params)] = sent
    assert None not in params
    assert len(params) <= psycopg_queries.MAX_CACHED_STATEMENT_PARAMS
    assert len(sql.encode()) <= psycopg_queries.MAX_CACHED_STATEMENT_LENGTH
    assert Event.objects.filter(last_observation_at__isnull=True, lease_owner="").count() == 2


def _publish_elsewhere(retired, **fields):
    """Publish a new version of ``retired``'s region as another process would: this one's
    presumption of the published version is left as it was."""
    type(retired).objects.filter(pk=retired.pk).update(status=Stage.RETIRED)
    return PolicyVersionFactory.create(region=retired.region, number=retired.number + 1, **fields)


def test_a_creation_after_a_publication_elsewhere_is_pinned_to_the_new_version(db, policy, clock):
    create_event(reset_request(), now=clock.now())
    newer = _publish_elsewhere(policy)

    created = create_event(reset_request(), now=clock.now())

    assert created.created
    assert Event.objects.get(pk=created.event.id).policy_id == newer.pk
    assert Event.objects.count() == 2


def test_a_request_the_old_version_refused_is_judged_under_the_one_published_since(db, policy, clock):
    create_event(reset_request(), now=clock.now())
    _publish_elsewhere(policy, allowed_sms_country_codes=[1, 33])

    created = create_event(reset_request(phone="+33612345678"), now=clock.now())

    assert created.created


def test_a_region_whose_version_was_retired_elsewhere_is_refused_as_unknown(db, policy, clock):
    create_event(reset_request(), now=clock.now())
    type(policy).objects.filter(pk=policy.pk).update(status=Stage.RETIRED)

    with pytest.raises(EventRefused) as refused:
        create_event(reset_request(), now=clock.now())

    assert refused.value.reason == Refusal.UNKNOWN_REGION
    assert Event.objects.count() == 1


def test_the_same_client_key_with_a_different_request_is_a_conflict(db, policy, clock):
    create_event(reset_request(client_key="k-1"), now=clock.now())

    with pytest.raises(EventRefused) as refused:
        create_event(reset_request(client_key="k-1", ttl=timedelta(seconds=900)), now=clock.now())

    assert refused.value.reason == Refusal.IDEMPOTENCY_CONFLICT
    assert Event.objects.count() == 1


def test_client_keys_are_scoped_to_the_calling_service(db, policy, clock):
    first = create_event(reset_request(client_key="k-1", service="accounts"), now=clock.now())
    other = create_event(reset_request(client_key="k-1", service="billing"), now=clock.now())

    assert other.created
    assert other.event.id != first.event.id


def test_it_refuses_an_expiry_that_leaves_no_action_budget(db, policy, clock):
    # The factory policy needs 120s: the fallback reserve.
    with pytest.raises(EventRefused) as refused:
        create_event(reset_request(ttl=timedelta(seconds=120)), now=clock.now())

    assert refused.value.reason == Refusal.UNUSABLE_EXPIRY
    assert "120" in refused.value.message
    assert not Event.objects.exists()
    assert not VaultEntry.objects.exists()


def test_it_accepts_the_shortest_expiry_that_leaves_a_budget(db, policy, clock):
    event = create_event(reset_request(ttl=timedelta(seconds=121)), now=clock.now()).event

    assert event.act_by > clock.now()


def test_it_refuses_a_lifetime_past_the_policy_maximum_whoever_creates_it(db, policy, clock):
    # The factory policy's maximum is an hour; the vault would keep the destinations until then.
    expires_at = clock.now() + policy.max_lifetime + timedelta(microseconds=1)

    with pytest.raises(EventRefused) as refused:
        create_event(reset_request(ttl=None, expires_at=expires_at), now=clock.now())

    assert (refused.value.reason, refused.value.field) == (Refusal.LIFETIME_TOO_LONG, "expires_at")
    assert "at most 3600s" in refused.value.message
    assert not VaultEntry.objects.exists()


def test_it_accepts_a_lifetime_of_exactly_the_policy_maximum(db, policy, clock):
    event = create_event(reset_request(ttl=policy.max_lifetime), now=clock.now()).event

    assert event.expires_at == clock.now() + timedelta(hours=1)


def test_it_refuses_a_region_without_an_active_policy(db, policy, clock):
    PolicyVersionFactory.create(region="EU", status=Stage.DRAFT, published_at=None)

    with pytest.raises(EventRefused) as refused:
        create_event(reset_request(region="EU"), now=clock.now())

    assert refused.value.reason == Refusal.UNKNOWN_REGION
    assert not Event.objects.exists()


def test_it_creates_under_the_published_version_of_the_region(db, policy, clock):
    PolicyVersionFactory.create(region="US", number=policy.number + 1, status=Stage.DRAFT)
    PolicyVersionFactory.create(region="EU", number=policy.number + 2)

    assert create_event(reset_request(), now=clock.now()).event.policy == policy


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("phone", "+1415555", Refusal.INVALID_PHONE),
        ("phone", "4155550123", Refusal.INVALID_PHONE),
        ("email", "not-an-address@", Refusal.INVALID_EMAIL),
        ("reset_url", "http://accounts.example.org/reset/x", Refusal.INVALID_RESET_URL),
        ("purpose", "marketing", Refusal.UNKNOWN_PURPOSE),
    ],
)
def test_it_refuses_bad_input_without_echoing_it(db, policy, clock, field, value, reason):
    with pytest.raises(EventRefused) as refused:
        create_event(reset_request(**{field: value}), now=clock.now())

    assert (refused.value.reason, refused.value.field) == (reason, field)
    assert value not in str(refused.value)
    assert not Event.objects.exists()


@pytest.mark.parametrize("expiry", [{"ttl": None}, {"expires_at": "both"}])
def test_it_needs_exactly_one_of_expires_at_and_ttl(db, policy, clock, expiry):
    if expiry.get("expires_at") == "both":
        expiry = {"expires_at": clock.now() + timedelta(seconds=600)}  # and the default ttl
    with pytest.raises(EventRefused) as refused:
        create_event(reset_request(**expiry), now=clock.now())

    assert refused.value.reason == Refusal.INVALID_EXPIRY


def test_an_event_without_an_email_has_no_fallback(db, policy, clock):
    event = create_event(reset_request(email=""), now=clock.now()).event

    assert not event.fallback_available
    assert event.email_recipient_ref == ""


def test_it_refuses_a_destination_outside_the_policy_countries(db, policy, clock):
    with pytest.raises(EventRefused) as refused:
        create_event(reset_request(phone="+33612345678"), now=clock.now())

    assert (refused.value.reason, refused.value.field) == (Refusal.DESTINATION_NOT_ALLOWED, "phone")
    assert "+33" in refused.value.message
    assert "612345678" not in refused.value.message
    assert not VaultEntry.objects.exists()


def test_it_refuses_an_event_without_the_consent_its_policy_requires(db, clock):
    PolicyVersionFactory.create(consent_required=True)

    with pytest.raises(EventRefused) as refused:
        create_event(reset_request(), now=clock.now())
    stored_after_refusal = VaultEntry.objects.count()
    created = create_event(reset_request(consent=True), now=clock.now())

    assert refused.value.reason == Refusal.CONSENT_REQUIRED
    assert stored_after_refusal == 0
    assert created.created


def test_an_email_only_plan_starts_with_the_email_claim(db, clock):
    PolicyVersionFactory.create(channel_plan=ChannelPlan.EMAIL_ONLY)

    event = create_event(reset_request(phone=""), now=clock.now()).event

    assert (event.state, event.fallback_available, event.next_action) == (
        State.EMAIL_CLAIMED,
        False,
        NextAction.SUBMIT_EMAIL,
    )
    assert list(Claim.objects.filter(event=event).values_list("channel", flat=True)) == [Channel.EMAIL]


def test_an_sms_only_plan_has_no_fallback_even_with_an_email(db, clock):
    PolicyVersionFactory.create(channel_plan=ChannelPlan.SMS_ONLY)

    event = create_event(reset_request(), now=clock.now()).event

    assert (event.state, event.fallback_available) == (State.SMS_REQUESTED, False)


def test_an_sms_plan_needs_a_phone(db, policy, clock):
    with pytest.raises(EventRefused) as refused:
        create_event(reset_request(phone=""), now=clock.now())

    assert refused.value.reason == Refusal.INVALID_PHONE
