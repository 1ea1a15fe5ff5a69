"""Policy changes judged on evidence: every draft's projected effect, approval on it, recommended drafts,
and from /pages to a draft that pages."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse

from notify.states import State
from policies.models import PolicyVersion, Status
from runbook import projections
from runbook.models import Page, PageMode, PolicyApproval, Projection, Recommendation
from tests.factories import PolicyVersionFactory, new_event
from tests.notify.workers import run_until_settled, scripted_event

CHANGELIST = reverse("admin:policies_policyversion_changelist")


@pytest.fixture(autouse=True)
def quick_projections(settings):
    # A small generated set keeps a projection to a fraction of a second here.
    settings.PROJECTION_GENERATED_RECORDS = 300
    settings.PROJECTION_MIN_RECORDS = 1000


def _staff(username: str, *codenames: str) -> User:
    user = User.objects.create_user(username, is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="policies", codename__in=codenames))
    return user


@pytest.fixture
def author(db) -> User:
    return _staff("policy-author", "view_policyversion", "add_policyversion", "change_policyversion")


@pytest.fixture
def approver(db) -> User:
    return _staff("privacy-owner", "view_policyversion", "change_policyversion", "approve_policyversion")


def change_url(version: PolicyVersion) -> str:
    return reverse("admin:policies_policyversion_change", args=[version.pk])


def draft_of(client, author: User, source: PolicyVersion, **changes) -> PolicyVersion:
    """Draft from ``source`` in the admin, then edit it there, as an author would."""
    client.force_login(author)
    client.post(CHANGELIST, {"action": "new_version_from", "_selected_action": [source.pk]})
    draft = PolicyVersion.objects.get(region=source.region, status=Status.DRAFT)
    if changes:
        for name, value in changes.items():
            setattr(draft, name, value)
        draft.save()
        projections.request(draft, draft.created_at)  # as the admin's save does
    return draft


def window_of(projection: Projection) -> timedelta:
    assert projection.window_start is not None
    assert projection.window_end is not None
    return projection.window_end - projection.window_start


def computed(draft: PolicyVersion) -> Projection:
    """What the projections lane does with the request."""
    projection = projections.compute(draft.pk, draft.created_at + timedelta(minutes=1))
    assert projection is not None
    return projection


def test_a_saved_draft_asks_for_its_projection_and_shows_it_beside_the_published_version(client, author, policy):
    draft = draft_of(client, author, policy, sms_budget=timedelta(seconds=90))
    waiting = client.get(change_url(draft)).content.decode()
    projection = Projection.objects.get(policy=draft)
    assert projection.requested_hash == projections.content_hash(draft)
    assert "Computing the projected effect" in waiting

    computed(draft)
    page = client.get(change_url(draft)).content.decode()

    assert f"published ({policy})" in page
    assert f"this draft ({draft})" in page
    for label in ("extra messages", "useless fallbacks", "expired without outcome", "would page",
                  "pages without action", "lifetime left at the claim, p50 (s)"):  # fmt: skip
        assert label in page
    # Too little history here: a seeded generated set, and the page says so, with its count.
    assert "300 generated records" in page
    assert "history too thin" in page
    assert reverse("admin:policy_projection_png", args=[draft.pk]) in page
    png = client.get(reverse("admin:policy_projection_png", args=[draft.pk]))
    assert png["Content-Type"] == "image/png"
    assert png.content.startswith(b"\x89PNG")


def test_the_figures_are_replay_s_own_for_each_version(client, author, policy):
    draft = draft_of(client, author, policy, sms_budget=timedelta(seconds=5))
    projection = computed(draft)

    # A 5 s budget sends the email before most receipts: more extra messages than the published 60 s.
    published, drafted = projection.figures["published"], projection.figures["draft"]
    assert published["events"] == drafted["events"] == 300
    assert drafted["extra_messages"] > published["extra_messages"]
    assert projection.compared_with == str(policy)


@pytest.mark.django_db(transaction=True)  # the worker's steps commit before each provider call
def test_a_projection_replays_the_region_s_own_history_when_there_is_enough(
    client, author, policy, clock, simulator, transports, settings
):
    settings.PROJECTION_MIN_RECORDS = 2
    for _ in range(3):
        run_until_settled(scripted_event(simulator, clock).id, transports, clock)
    draft = draft_of(client, author, policy)

    projection = projections.compute(draft.pk, clock.now())

    assert projection is not None
    assert (projection.records, projection.generated) == (3, False)
    assert "3 resets of US in the last 7 days" in projection.note
    assert window_of(projection) == timedelta(days=7)


def test_the_window_never_reaches_past_the_observation_retention(client, author, db):
    kept_two_days = PolicyVersionFactory.create(observation_retention=timedelta(days=2))
    draft = draft_of(client, author, kept_two_days)
    projection = computed(draft)
    assert window_of(projection) == timedelta(days=2)


def test_a_draft_changed_since_its_projection_says_so_and_is_recomputed(client, author, policy):
    draft = draft_of(client, author, policy)
    computed(draft)
    draft.sms_budget = timedelta(seconds=75)
    draft.save()

    page = client.get(change_url(draft)).content.decode()

    assert "Stale: the draft changed since this projection was computed" in page
    assert Projection.objects.get(policy=draft).requested_hash == projections.content_hash(draft)
    computed(draft)
    assert "Stale" not in client.get(change_url(draft)).content.decode()


def test_approval_needs_a_projection_of_the_current_draft_and_keeps_its_figures(client, author, approver, policy):
    draft = draft_of(client, author, policy, sms_budget=timedelta(seconds=90))
    client.force_login(approver)

    refused = client.post(CHANGELIST, {"action": "approve", "_selected_action": [draft.pk]}, follow=True)
    assert "has no projection of its current content yet" in refused.content.decode()
    projection = computed(draft)
    approved = client.post(reverse("admin:policy_approve", args=[draft.pk]), {"reason": ""}, follow=True)

    draft.refresh_from_db()
    assert draft.status == Status.APPROVED
    kept = PolicyApproval.objects.get(policy=draft)
    assert (kept.approver, kept.figures, kept.records) == (approver, projection.figures, 300)
    assert kept.content_hash == projections.content_hash(draft)
    assert "approved, with the figures of its projection" in approved.content.decode()
    history = client.get(reverse("admin:policies_policyversion_history", args=[draft.pk])).content.decode()
    assert "Approved on this evidence" in history
    assert f"this draft ({draft})" in history


def test_a_draft_breaking_the_region_s_targets_is_marked_and_approved_only_with_a_written_reason(
    client, author, approver, policy, settings
):
    settings.POLICY_TARGETS = ["extra_messages<=0", "EU:would_page<=0"]
    draft = draft_of(client, author, policy, sms_budget=timedelta(seconds=5))
    projection = computed(draft)
    assert projection.broken_targets == ["extra_messages <= 0"]  # EU's own target is not US's
    client.force_login(approver)
    assert "Breaks the region's targets: extra_messages &lt;= 0" in client.get(change_url(draft)).content.decode()

    by_action = client.post(CHANGELIST, {"action": "approve", "_selected_action": [draft.pk]}, follow=True)
    without = client.post(reverse("admin:policy_approve", args=[draft.pk]), {"reason": "  "})
    draft.refresh_from_db()
    assert draft.status == Status.DRAFT
    assert "approving it needs a written reason" in by_action.content.decode()
    assert "approving it needs a written reason" in without.content.decode()

    reason = "one extra SMS per thousand is worth the faster email in the EU outage"
    client.post(reverse("admin:policy_approve", args=[draft.pk]), {"reason": reason})

    draft.refresh_from_db()
    assert draft.status == Status.APPROVED
    kept = PolicyApproval.objects.get(policy=draft)
    assert (kept.reason, kept.broken_targets) == (reason, ["extra_messages <= 0"])
    assert reason in client.get(reverse("admin:policies_policyversion_history", args=[draft.pk])).content.decode()


def test_an_approval_of_content_edited_after_the_projection_is_refused(client, author, approver, policy):
    draft = draft_of(client, author, policy)
    computed(draft)
    reviewed = PolicyVersion.objects.get(pk=draft.pk)
    draft.sms_budget = timedelta(seconds=80)
    draft.save()  # an edit lands after the approver loaded the page
    client.force_login(approver)

    page = client.post(reverse("admin:policy_approve", args=[reviewed.pk]), {"reason": ""}).content.decode()

    assert "no projection of its current content yet" in page
    assert PolicyVersion.objects.get(pk=draft.pk).status == Status.DRAFT
    assert not PolicyApproval.objects.exists()


def test_a_draft_is_created_from_the_region_s_latest_recommendation(client, author, policy):
    Recommendation.objects.create(
        region="US", field="sms_budget", value="95", based_on=policy, targets=["extra_messages <= 0"],
        figures={}, records=1000, source="week.csv", created_at=policy.created_at,
    )  # fmt: skip
    client.force_login(author)

    client.post(CHANGELIST, {"action": "draft_from_recommendation", "_selected_action": [policy.pk]})

    draft = PolicyVersion.objects.get(status=Status.DRAFT)
    assert draft.sms_budget == timedelta(seconds=95)
    assert draft.fallback_reserve == policy.fallback_reserve
    assert "replay recommends sms_budget=95" in draft.reason
    assert Projection.objects.get(policy=draft).requested_hash == projections.content_hash(draft)


def test_pages_splits_would_have_paged_events_and_drafts_a_paging_version(client, author, policy, clock):
    for next_action in ("poll_sms", "claim_email", "expire"):
        Page.objects.create(
            event=new_event(clock.now()), region="US", mode=PageMode.OBSERVE, opened_at=clock.now(),
            state=State.SMS_PENDING, next_action=next_action, budget_seconds=10,
        )  # fmt: skip
    author.user_permissions.add(Permission.objects.get(codename="view_console"))
    client.force_login(author)

    page = client.get(reverse("runbook:page-review")).content.decode()
    drafted = client.post(reverse("admin:policy_draft_paging", args=["US"]), follow=True)

    assert "data-actionable>2<" in page
    assert "data-without-action>1<" in page
    assert "Draft a version of US that pages" in page
    draft = PolicyVersion.objects.get(status=Status.DRAFT)
    assert (draft.alert_mode, draft.author) == ("page", author)
    assert policy.alert_mode == "observe"
    assert "it needs approval like any other" in drafted.content.decode()
