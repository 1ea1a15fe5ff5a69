"""Policy admin: create a version from another, see the diff, refuse edits of published versions,
record who edited a draft, and offer each action that writes only to those allowed to write."""

from datetime import timedelta

import pytest
from django.contrib import admin
from django.contrib.auth.models import Permission, User
from django.urls import reverse

from policies.admin import PolicyVersionAdmin
from policies.models import PolicyVersion, Stage
from runbook.evidence import projections
from runbook.evidence.admin import EvidencedPolicyVersionAdmin
from runbook.models import Recommendation
from tests.policies.admin_client import approve_url, form_of, shown_on

CHANGELIST = reverse("admin:policies_policyversion_changelist")


@pytest.fixture
def staff(db):
    user = User.objects.create_user("policy-author", is_staff=True)
    for codename in ("view_policyversion", "add_policyversion", "change_policyversion"):
        user.user_permissions.add(Permission.objects.get(codename=codename))
    return user


@pytest.fixture
def owner(db):
    user = User.objects.create_user("privacy-owner", is_staff=True)
    for codename in ("view_policyversion", "change_policyversion", "approve_policyversion", "publish_policyversion"):
        user.user_permissions.add(Permission.objects.get(codename=codename))
    return user


@pytest.fixture
def viewer(db):
    user = User.objects.create_user("auditor", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_policyversion"))
    return user


def run_action(client, action, version):
    return client.post(CHANGELIST, {"action": action, "_selected_action": [version.pk]}, follow=True)


def test_the_list_shows_versions_by_region(client, staff, policy):
    client.force_login(staff)

    page = client.get(CHANGELIST, {"region": policy.region})

    assert page.status_code == 200
    html = page.content.decode()
    assert reverse("admin:policies_policyversion_change", args=[policy.pk]) in html
    assert "By region" in html


def test_a_new_version_is_drafted_from_an_existing_one_and_shows_its_diff(client, staff, policy):
    client.force_login(staff)

    run_action(client, "new_version_from", policy)
    draft = PolicyVersion.objects.get(status=Stage.DRAFT)
    client.post(
        reverse("admin:policies_policyversion_change", args=[draft.pk]),
        {**form_of(draft), "sms_budget": "00:02:30", "reason": "roaming receipts are slower"},
    )
    page = client.get(reverse("admin:policies_policyversion_change", args=[draft.pk])).content.decode()

    draft.refresh_from_db()
    assert (draft.number, draft.author, draft.sms_budget) == (policy.number + 1, staff, timedelta(seconds=150))
    assert "this version" in page  # the diff table
    assert "sms_budget" in page
    assert "0:01:00" in page  # the previous value, shown beside the new one
    assert "0:02:30" in page


def test_a_published_version_is_read_only_and_an_edit_changes_nothing(client, staff, policy):
    client.force_login(staff)
    url = reverse("admin:policies_policyversion_change", args=[policy.pk])

    page = client.get(url).content.decode()
    edit = client.post(url, {**form_of(policy), "sms_budget": "00:10:00"})

    assert 'name="sms_budget"' not in page
    assert edit.status_code == 403
    policy.refresh_from_db()
    assert policy.sms_budget == timedelta(seconds=60)


def test_an_invalid_draft_shows_the_error_on_its_field(client, staff, policy):
    client.force_login(staff)
    run_action(client, "new_version_from", policy)
    draft = PolicyVersion.objects.get(status=Stage.DRAFT)

    page = client.post(
        reverse("admin:policies_policyversion_change", args=[draft.pk]),
        {**form_of(draft), "fallback_reserve": "00:00:01"},
    ).content.decode()

    assert "fallback_reserve" in page
    assert "must cover email submit + record" in page


def test_a_draft_letting_resets_live_past_a_day_is_refused_on_its_field(client, staff, policy):
    client.force_login(staff)
    run_action(client, "new_version_from", policy)
    draft = PolicyVersion.objects.get(status=Stage.DRAFT)

    page = client.post(
        reverse("admin:policies_policyversion_change", args=[draft.pk]),
        {**form_of(draft), "max_lifetime": "1 00:00:01"},
    ).content.decode()

    assert "max_lifetime must be at most 24 hours" in page
    draft.refresh_from_db()
    assert draft.max_lifetime == policy.max_lifetime


def test_only_the_policy_owner_can_approve_and_publish(client, staff, owner, policy):
    client.force_login(staff)
    run_action(client, "new_version_from", policy)
    draft = PolicyVersion.objects.get(status=Stage.DRAFT)
    projections.compute(draft.pk, draft.created_at)  # its projected effect, which approval needs

    offered = client.get(CHANGELIST).content.decode()
    refused = client.post(approve_url(draft), {"shown": shown_on(client.get(approve_url(draft)))}).content.decode()
    client.force_login(owner)
    opened = run_action(client, "approve", draft)  # the action opens the draft's approval page
    client.post(approve_url(draft), {"shown": shown_on(opened)})
    run_action(client, "publish", draft)

    assert 'value="approve"' not in offered
    assert 'value="publish"' not in offered
    assert "approver permission" in refused
    assert opened.redirect_chain == [(approve_url(draft), 302)]
    draft.refresh_from_db()
    assert (draft.status, draft.approved_by) == (Stage.PUBLISHED, owner)
    assert PolicyVersion.objects.active_for(policy.region) == draft


def test_drafts_are_approved_one_at_a_time_each_on_its_own_page(client, staff, owner, policy):
    client.force_login(staff)
    run_action(client, "new_version_from", policy)
    run_action(client, "new_version_from", policy)
    drafts = PolicyVersion.objects.filter(status=Stage.DRAFT)
    client.force_login(owner)

    page = client.post(CHANGELIST, {"action": "approve", "_selected_action": [d.pk for d in drafts]}, follow=True)

    assert "Select one draft" in page.content.decode()
    assert drafts.count() == 2


def test_everyone_who_changes_a_draft_s_content_is_recorded_as_its_editor(client, staff, owner, policy):
    proofreader = User.objects.create_user("proofreader", is_staff=True)
    proofreader.user_permissions.add(
        *Permission.objects.filter(codename__in=["view_policyversion", "change_policyversion"])
    )
    client.force_login(staff)
    run_action(client, "new_version_from", policy)
    draft = PolicyVersion.objects.get(status=Stage.DRAFT)
    url = reverse("admin:policies_policyversion_change", args=[draft.pk])

    client.post(url, {**form_of(draft), "sms_budget": "00:01:30"})
    client.force_login(owner)  # a colleague rewrites the draft
    draft.refresh_from_db()
    client.post(url, {**form_of(draft), "sms_budget": "00:01:15"})
    client.force_login(proofreader)  # the reason is not content: its writer did not write the policy
    draft.refresh_from_db()
    client.post(url, {**form_of(draft), "reason": "a clearer reason, the content unchanged"})
    page = client.get(url).content.decode()

    draft.refresh_from_db()
    assert (draft.sms_budget, draft.reason) == (timedelta(seconds=75), "a clearer reason, the content unchanged")
    assert set(draft.editors.all()) == {staff, owner}
    assert "Edited by" in page
    assert "policy-author, privacy-owner" in page


def test_a_view_only_user_is_offered_no_action_that_writes(client, viewer, policy):
    client.force_login(viewer)

    page = client.get(CHANGELIST)

    assert page.status_code == 200
    for action in ("new_version_from", "draft_from_recommendation", "approve", "publish"):
        assert f'value="{action}"' not in page.content.decode()


@pytest.mark.parametrize("action", ["new_version_from", "draft_from_recommendation"])
def test_a_view_only_user_posting_a_drafting_action_creates_nothing(client, viewer, policy, action):
    Recommendation.objects.create(
        region="US", field="sms_budget", value="95", based_on=policy, targets=[], created_at=policy.created_at
    )
    client.force_login(viewer)

    run_action(client, action, policy)

    assert list(PolicyVersion.objects.all()) == [policy]


@pytest.mark.parametrize("admin_class", [PolicyVersionAdmin, EvidencedPolicyVersionAdmin])
def test_every_action_declares_the_permission_it_needs(admin_class):
    model_admin = admin_class(PolicyVersion, admin.site)

    undeclared = [
        name for name in model_admin.actions if not getattr(getattr(model_admin, name), "allowed_permissions", ())
    ]

    assert undeclared == []


def test_adding_a_version_in_admin_makes_a_draft_with_the_next_number(client, staff, policy):
    client.force_login(staff)
    form = {**form_of(policy), "region": policy.region, "reason": "first EU-style consent for US"}

    client.post(reverse("admin:policies_policyversion_add"), form)

    draft = PolicyVersion.objects.get(status=Stage.DRAFT)
    assert (draft.number, draft.author, draft.region) == (policy.number + 1, staff, policy.region)
