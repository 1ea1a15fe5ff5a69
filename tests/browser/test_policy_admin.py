"""A new admin in a real browser: draft a policy, see its projected effect beside the published version,
approve it (with a written reason where it breaks the region's targets), and draft from a recommendation."""

import re
from datetime import timedelta
from io import StringIO

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import call_command
from playwright.sync_api import expect

from plumbing.clock import system_clock
from policies.models import PolicyVersion, Stage
from runbook.evidence import projections
from runbook.models import PolicyApproval
from runbook.replay import timings
from tests.browser.conftest import PASSWORD
from tests.factories import PolicyVersionFactory

pytestmark = pytest.mark.django_db(transaction=True)

AUTHOR = ("view_policyversion", "add_policyversion", "change_policyversion")
APPROVER = ("view_policyversion", "change_policyversion", "approve_policyversion")


@pytest.fixture(autouse=True)
def quick_projections(settings):
    settings.PROJECTION_GENERATED_RECORDS = 300
    # Every extra message counts against the region: a short SMS budget breaks this target.
    settings.POLICY_TARGETS = ["extra_messages<=0"]


def _staff(username: str, codenames: tuple[str, ...]) -> User:
    user = User.objects.create_user(username, password=PASSWORD, is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="policies", codename__in=codenames))
    return user


def _log_in(page, live_server, username: str) -> None:
    page.goto(f"{live_server.url}/admin/login/?next=/admin/policies/policyversion/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    expect(page.get_by_role("heading", name="Select policy version to change")).to_be_visible()


def _run_action(page, version: PolicyVersion, action: str) -> None:
    page.check(f'input[name="_selected_action"][value="{version.pk}"]')
    page.select_option('select[name="action"]', action)
    page.click("button[name=index]")  # "Go"


def _project(version: PolicyVersion) -> None:
    """What the projections lane's worker does with the draft's request."""
    assert projections.compute(version.pk, system_clock.now()) is not None


def test_a_new_admin_drafts_sees_the_projection_and_approves_with_a_reason(page, browser, live_server):
    published = PolicyVersionFactory.create()
    _staff("ada", AUTHOR)
    _staff("olu", APPROVER)

    _log_in(page, live_server, "ada")
    _run_action(page, published, "new_version_from")
    expect(page.locator(".messagelist")).to_contain_text(f"from {published}")
    draft = PolicyVersion.objects.get(status=Stage.DRAFT)
    page.goto(f"{live_server.url}/admin/policies/policyversion/{draft.pk}/change/")
    expect(page.locator(".projection-pending")).to_contain_text("Computing the projected effect")
    page.fill("#id_sms_budget", "00:00:05")
    page.fill("#id_reason", "send the email sooner")
    page.get_by_role("button", name="Save", exact=True).click()
    draft.refresh_from_db()
    assert draft.sms_budget == timedelta(seconds=5)
    _project(draft)

    page.goto(f"{live_server.url}/admin/policies/policyversion/{draft.pk}/change/")
    table = page.locator(".projection table")
    expect(table.locator("thead")).to_contain_text(f"published ({published})")
    expect(table.locator("thead")).to_contain_text(f"this draft ({draft})")
    expect(table).to_contain_text("extra messages")
    expect(page.locator(".projection .help")).to_contain_text("300 generated records")
    expect(page.locator(".projection-breaks")).to_contain_text("extra_messages <= 0")
    plot = page.locator("img.projection-plot")
    expect(plot).to_be_visible()
    assert plot.evaluate("image => image.complete && image.naturalWidth > 0"), "the trade-off plot did not load"

    second = browser.new_context(viewport={"width": 1280, "height": 900})  # another person, another session
    approver = second.new_page()
    _log_in(approver, live_server, "olu")
    approver.goto(f"{live_server.url}/admin/policies/policyversion/{draft.pk}/change/")
    approver.get_by_role("link", name="Approve this draft…").click()
    expect(approver.get_by_role("heading", name=f"Approve {draft}")).to_be_visible()
    approver.get_by_role("button", name=f"Approve {draft}").click()
    expect(approver.locator(".errorlist")).to_contain_text("approving it needs a written reason")
    assert PolicyVersion.objects.get(pk=draft.pk).status == Stage.DRAFT

    approver.fill("#id_reason", "the EU outage needs the email within seconds; extra SMS accepted")
    approver.get_by_role("button", name=f"Approve {draft}").click()

    expect(approver.locator(".messagelist")).to_contain_text("approved, with the figures of its projection")
    assert PolicyVersion.objects.get(pk=draft.pk).status == Stage.APPROVED
    assert PolicyApproval.objects.get(policy=draft).reason.startswith("the EU outage")
    approver.goto(f"{live_server.url}/admin/policies/policyversion/{draft.pk}/history/")
    expect(approver.locator("#approval-evidence")).to_contain_text("Approved by olu")
    expect(approver.locator("#approval-evidence")).to_contain_text(f"this draft ({draft})")
    assert page.problems == []
    second.close()


def test_a_new_admin_drafts_from_a_recommendation(page, live_server, tmp_path):
    published = PolicyVersionFactory.create()
    _staff("ada", AUTHOR)
    path = tmp_path / "late.csv"
    timings.write(path, [timings.Timing("US", 600, 0.5, 90, "delivered", 1, "accepted")] * 20)
    call_command(
        "replay", str(path), "--recommend", "sms_budget", "--target", "extra_messages<=0",
        "--out", str(tmp_path / "out"), "--no-progress", stdout=StringIO(), stderr=StringIO(),
    )  # fmt: skip

    _log_in(page, live_server, "ada")
    _run_action(page, published, "draft_from_recommendation")

    expect(page.locator(".messagelist")).to_contain_text(re.compile(r"with sms_budget=0:01:\d\d"))
    draft = PolicyVersion.objects.get(status=Stage.DRAFT)
    assert timedelta(seconds=90) <= draft.sms_budget <= timedelta(seconds=100)
    assert "replay recommends sms_budget=" in draft.reason
    assert page.problems == []
