"""Policy admin: create a version from another, see the diff, refuse edits of published versions."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse

from policies.models import PolicyVersion, Status
from runbook import projections

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
    draft = PolicyVersion.objects.get(status=Status.DRAFT)
    client.post(
        reverse("admin:policies_policyversion_change", args=[draft.pk]),
        {**_form(draft), "sms_budget": "00:02:30", "reason": "roaming receipts are slower"},
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
    edit = client.post(url, {**_form(policy), "sms_budget": "00:10:00"})

    assert 'name="sms_budget"' not in page
    assert edit.status_code == 403
    policy.refresh_from_db()
    assert policy.sms_budget == timedelta(seconds=60)


def test_an_invalid_draft_shows_the_error_on_its_field(client, staff, policy):
    client.force_login(staff)
    run_action(client, "new_version_from", policy)
    draft = PolicyVersion.objects.get(status=Status.DRAFT)

    page = client.post(
        reverse("admin:policies_policyversion_change", args=[draft.pk]),
        {**_form(draft), "fallback_reserve": "00:00:01"},
    ).content.decode()

    assert "fallback_reserve" in page
    assert "must cover email submit + record" in page


def test_a_draft_letting_resets_live_past_a_day_is_refused_on_its_field(client, staff, policy):
    client.force_login(staff)
    run_action(client, "new_version_from", policy)
    draft = PolicyVersion.objects.get(status=Status.DRAFT)

    page = client.post(
        reverse("admin:policies_policyversion_change", args=[draft.pk]),
        {**_form(draft), "max_lifetime": "1 00:00:01"},
    ).content.decode()

    assert "max_lifetime must be at most 24 hours" in page
    draft.refresh_from_db()
    assert draft.max_lifetime == policy.max_lifetime


def test_only_the_policy_owner_can_approve_and_publish(client, staff, owner, policy):
    client.force_login(staff)
    run_action(client, "new_version_from", policy)
    draft = PolicyVersion.objects.get(status=Status.DRAFT)

    refused = run_action(client, "approve", draft).content.decode()
    projections.compute(draft.pk, draft.created_at)  # its projected effect, which approval needs
    client.force_login(owner)
    run_action(client, "approve", draft)
    run_action(client, "publish", draft)

    assert "approver permission" in refused
    draft.refresh_from_db()
    assert (draft.status, draft.approved_by) == (Status.PUBLISHED, owner)
    assert PolicyVersion.objects.active_for(policy.region) == draft


def _form(version):
    """The admin form's fields with the version's current values."""
    data = {}
    for field in PolicyVersion._meta.concrete_fields:
        value = getattr(version, field.attname)
        if value is None or field.attname in ("id", "created_at"):
            continue
        if isinstance(value, timedelta):
            value = str(value)
        elif isinstance(value, bool):
            if not value:
                continue
            value = "on"
        elif isinstance(value, list):
            value = str(value)
        data[field.attname] = value
    return data


def test_adding_a_version_in_admin_makes_a_draft_with_the_next_number(client, staff, policy):
    client.force_login(staff)
    form = {**_form(policy), "region": policy.region, "reason": "first EU-style consent for US"}

    client.post(reverse("admin:policies_policyversion_add"), form)

    draft = PolicyVersion.objects.get(status=Status.DRAFT)
    assert (draft.number, draft.author, draft.region) == (policy.number + 1, staff, policy.region)
