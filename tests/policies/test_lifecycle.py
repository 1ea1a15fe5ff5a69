"""Drafting, approval of the content shown by someone who wrote none of it, publishing, and immutability once
approved."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.core.exceptions import ValidationError

from policies import lifecycle
from policies.lifecycle import PolicyLifecycleError
from policies.models import PolicyVersion, Stage, content_digest
from tests.conftest import T0
from tests.factories import PolicyVersionFactory


def user(name, *perms):
    account = User.objects.create_user(name)
    for codename in perms:
        account.user_permissions.add(Permission.objects.get(codename=codename))
    return User.objects.get(pk=account.pk)  # fresh permission cache


@pytest.fixture
def author(db):
    return user("author")


@pytest.fixture
def approver(db):
    return user("privacy-owner", "approve_policyversion", "publish_policyversion")


@pytest.fixture
def draft(db, policy, author):
    return lifecycle.draft_from(policy, author=author, reason="longer SMS budget for roaming")


def test_a_new_version_copies_the_content_and_takes_the_next_number(draft, policy):
    assert (draft.region, draft.number, draft.status) == (policy.region, policy.number + 1, Stage.DRAFT)
    assert draft.sms_budget == policy.sms_budget


def test_a_draft_can_be_edited(draft, author):
    draft.sms_budget *= 2
    draft.save(editor=author)

    assert PolicyVersion.objects.get(pk=draft.pk).sms_budget == draft.sms_budget


def test_a_change_of_a_draft_s_content_names_its_editor(draft):
    draft.sms_budget *= 2

    with pytest.raises(ValidationError, match="must name its editor"):
        draft.save()

    assert PolicyVersion.objects.get(pk=draft.pk).sms_budget != draft.sms_budget


def test_an_author_cannot_approve_their_own_version(draft, author):
    author.user_permissions.add(Permission.objects.get(codename="approve_policyversion"))
    author = User.objects.get(pk=author.pk)

    with pytest.raises(PolicyLifecycleError, match="someone other than its author"):
        lifecycle.approve(draft, approver=author, shown=content_digest(draft), now=T0)


def test_approval_needs_the_approver_permission(draft):
    with pytest.raises(PolicyLifecycleError, match="approver permission"):
        lifecycle.approve(draft, approver=user("bystander"), shown=content_digest(draft), now=T0)


def test_publishing_records_the_approval_and_retires_the_previous_version(draft, approver, policy):
    lifecycle.approve(draft, approver=approver, shown=content_digest(draft), now=T0)
    lifecycle.publish(draft, publisher=approver, now=T0)

    policy.refresh_from_db()
    assert (draft.status, draft.approved_by, draft.approved_at, draft.published_at) == (
        Stage.PUBLISHED,
        approver,
        T0,
        T0,
    )
    assert policy.status == Stage.RETIRED
    assert PolicyVersion.objects.active_for(draft.region) == draft


def test_only_users_with_the_publish_permission_can_publish(draft, approver):
    lifecycle.approve(draft, approver=approver, shown=content_digest(draft), now=T0)

    with pytest.raises(PolicyLifecycleError, match="publish permission"):
        lifecycle.publish(draft, publisher=user("approver-only", "approve_policyversion"), now=T0)


def test_a_draft_cannot_be_published_without_approval(draft, approver):
    with pytest.raises(PolicyLifecycleError, match="not approved"):
        lifecycle.publish(draft, publisher=approver, now=T0)


@pytest.mark.parametrize("status", [Stage.APPROVED, Stage.PUBLISHED, Stage.RETIRED])
def test_a_version_that_left_draft_cannot_be_changed(db, status):
    version = PolicyVersionFactory.create(status=status, region=f"R{status[:3]}")
    version.sms_budget *= 2

    with pytest.raises(ValidationError, match="immutable"):
        version.save()

    assert PolicyVersion.objects.get(pk=version.pk).sms_budget != version.sms_budget


def test_an_edit_after_the_review_voids_the_approval(draft, author, approver):
    shown = content_digest(draft)  # what the approver looked at
    draft.sms_budget *= 3
    draft.save(editor=author)  # the author edits after the review

    with pytest.raises(PolicyLifecycleError, match="changed since you opened it; review it again"):
        lifecycle.approve(draft, approver=approver, shown=shown, now=T0)

    assert PolicyVersion.objects.get(pk=draft.pk).status == Stage.DRAFT


def test_someone_who_edited_a_colleague_s_draft_cannot_approve_it(draft, approver):
    draft.sms_budget *= 3
    draft.save(editor=approver)  # the approver rewrites the author's draft

    with pytest.raises(PolicyLifecycleError, match="someone other than its author or editors: you edited it"):
        lifecycle.approve(draft, approver=approver, shown=content_digest(draft), now=T0)

    assert PolicyVersion.objects.get(pk=draft.pk).status == Stage.DRAFT


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_racing_drafts_each_get_their_own_number():
    from tests.concurrency import race

    source = PolicyVersionFactory.create()

    drafts = race(lambda i: lifecycle.draft_from(source, author=None, reason=f"draft {i}"))

    numbers = sorted(draft.number for draft in drafts)
    assert numbers == list(range(source.number + 1, source.number + 1 + len(drafts)))


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_an_approval_racing_edits_approves_the_content_shown_or_nothing():
    from tests.concurrency import race

    author = user("author")
    approvers = [user(f"owner-{i}", "approve_policyversion") for i in range(4)]
    draft = lifecycle.draft_from(PolicyVersionFactory.create(), author=author, reason="racing")
    shown = content_digest(draft)

    def act(i: int) -> str:
        mine = PolicyVersion.objects.get(pk=draft.pk)  # each person's own page
        if i % 2:
            try:
                lifecycle.approve(mine, approver=approvers[i // 2], shown=shown, now=T0)
            except PolicyLifecycleError:
                return "approval refused"
            return "approved"
        mine.sms_budget = timedelta(seconds=100 + i)  # never the content shown
        try:
            mine.save(editor=author)
        except ValidationError:
            return "edit refused"
        return "edited"

    outcomes = race(act)

    final = PolicyVersion.objects.get(pk=draft.pk)
    if final.status == Stage.APPROVED:
        # Approved exactly as shown: every edit came after it, and was refused.
        assert (outcomes.count("approved"), outcomes.count("edited")) == (1, 0)
        assert content_digest(final) == shown
    else:
        # An edit landed first: every approval of the content shown was refused.
        assert "approved" not in outcomes
        assert final.status == Stage.DRAFT
