"""Policy changes judged on evidence: every draft's projected effect, approval on it, recommended drafts,
and from /pages to a draft that pages."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse

from notify.rules.vocabulary import State
from policies.models import PolicyVersion, Stage, content_digest
from runbook.evidence import projections
from runbook.models import Page, PageMode, PolicyApproval, Projection, Recommendation
from tests.factories import PolicyVersionFactory, new_event
from tests.notify.workers import run_until_settled, scripted_event
from tests.policies.admin_client import approve_url, form_of, shown_on

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
    draft = PolicyVersion.objects.get(region=source.region, status=Stage.DRAFT)
    if changes:
        edit(draft, author, **changes)
    return draft


def edit(draft: PolicyVersion, editor: User, **changes) -> PolicyVersion:
    """Change the draft as ``editor`` does in the admin: saved, and its projection asked for."""
    for name, value in changes.items():
        setattr(draft, name, value)
    draft.save(editor=editor)
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
    assert projection.requested_hash == content_digest(draft)
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
    edit(draft, author, sms_budget=timedelta(seconds=75))

    page = client.get(change_url(draft)).content.decode()

    assert "Stale: the draft changed since this projection was computed" in page
    assert Projection.objects.get(policy=draft).requested_hash == content_digest(draft)
    computed(draft)
    assert "Stale" not in client.get(change_url(draft)).content.decode()


def test_approval_needs_a_projection_of_the_current_draft_and_keeps_its_figures(client, author, approver, policy):
    draft = draft_of(client, author, policy, sms_budget=timedelta(seconds=90))
    client.force_login(approver)

    refused = client.post(CHANGELIST, {"action": "approve", "_selected_action": [draft.pk]}, follow=True)
    assert "has no projection of its current content yet" in refused.content.decode()
    assert shown_on(refused) == ""  # nothing to approve on that page
    projection = computed(draft)
    opened = client.get(approve_url(draft))
    approved = client.post(approve_url(draft), {"shown": shown_on(opened), "reason": ""}, follow=True)

    draft.refresh_from_db()
    assert draft.status == Stage.APPROVED
    kept = PolicyApproval.objects.get(policy=draft)
    assert (kept.approver, kept.figures, kept.records) == (approver, projection.figures, 300)
    assert kept.content_hash == content_digest(draft)
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
    without = client.post(approve_url(draft), {"shown": shown_on(by_action), "reason": "  "})
    draft.refresh_from_db()
    assert draft.status == Stage.DRAFT
    assert "Approving it needs a written reason" in by_action.content.decode()
    assert "approving it needs a written reason" in without.content.decode()

    reason = "one extra SMS per thousand is worth the faster email in the EU outage"
    client.post(approve_url(draft), {"shown": shown_on(without), "reason": reason})

    draft.refresh_from_db()
    assert draft.status == Stage.APPROVED
    kept = PolicyApproval.objects.get(policy=draft)
    assert (kept.reason, kept.broken_targets) == (reason, ["extra_messages <= 0"])
    assert reason in client.get(reverse("admin:policies_policyversion_history", args=[draft.pk])).content.decode()


def test_the_approval_page_shows_the_changes_and_carries_the_digest_of_that_content(client, author, approver, policy):
    draft = draft_of(client, author, policy, sms_budget=timedelta(seconds=90))
    computed(draft)
    client.force_login(approver)

    page = client.get(approve_url(draft))

    assert shown_on(page) == content_digest(draft)
    html = page.content.decode()
    assert "sms_budget" in html
    assert "0:01:30" in html  # the draft's value, beside the published one
    assert f"this draft ({draft})" in html  # and its projection


def test_an_edit_after_the_approver_opened_the_page_is_not_approved_unseen(client, author, approver, policy):
    draft = draft_of(client, author, policy)
    computed(draft)
    client.force_login(approver)
    opened = client.get(approve_url(draft))  # the approver reads the page
    edit(draft, author, sms_budget=timedelta(seconds=80))  # the author edits meanwhile
    computed(draft)  # and the projections lane is quick

    page = client.post(approve_url(draft), {"shown": shown_on(opened), "reason": ""})

    assert "changed since you opened it; review it again" in page.content.decode()
    assert shown_on(page) == content_digest(PolicyVersion.objects.get(pk=draft.pk))  # the page now shows the edit
    assert PolicyVersion.objects.get(pk=draft.pk).status == Stage.DRAFT
    assert not PolicyApproval.objects.exists()


def test_someone_who_edited_a_colleague_s_draft_cannot_approve_it(client, author, approver, policy):
    draft = draft_of(client, author, policy)
    client.force_login(approver)
    client.post(change_url(draft), {**form_of(draft), "sms_budget": "00:00:45"})  # the approver rewrites it
    draft.refresh_from_db()
    assert draft.sms_budget == timedelta(seconds=45)
    computed(draft)

    page = client.post(approve_url(draft), {"shown": shown_on(client.get(approve_url(draft))), "reason": "fine"})

    assert "someone other than its author or editors: you edited it" in page.content.decode()
    assert PolicyVersion.objects.get(pk=draft.pk).status == Stage.DRAFT
    assert not PolicyApproval.objects.exists()


def test_a_draft_is_created_from_the_region_s_latest_recommendation(client, author, policy):
    Recommendation.objects.create(
        region="US", field="sms_budget", value="95", based_on=policy, targets=["extra_messages <= 0"],
        figures={}, records=1000, source="week.csv", created_at=policy.created_at,
    )  # fmt: skip
    client.force_login(author)

    client.post(CHANGELIST, {"action": "draft_from_recommendation", "_selected_action": [policy.pk]})

    draft = PolicyVersion.objects.get(status=Stage.DRAFT)
    assert draft.sms_budget == timedelta(seconds=95)
    assert draft.fallback_reserve == policy.fallback_reserve
    assert "replay recommends sms_budget=95" in draft.reason
    assert Projection.objects.get(policy=draft).requested_hash == content_digest(draft)


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
    draft = PolicyVersion.objects.get(status=Stage.DRAFT)
    assert (draft.alert_mode, draft.author) == ("page", author)
    assert policy.alert_mode == "observe"
    assert "it needs approval like any other" in drafted.content.decode()
