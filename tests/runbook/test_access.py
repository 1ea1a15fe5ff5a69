"""Who may open what: every console view and action, for every kind of user."""

import pytest
from django.urls import reverse

from runbook.models import AuditAction, AuditEntry
from tests.factories import new_event

PAGES = ["runbook:events", "runbook:follow-ups", "runbook:page-review", "runbook:event", "runbook:raw-statuses"]
ACTIONS = ["runbook:release-lease", "runbook:claim-fallback", "runbook:follow-up"]


@pytest.fixture
def event(clock, policy):
    return new_event(clock.now())


def _url(name, event):
    per_event = {"runbook:event", "runbook:raw-statuses", *ACTIONS}
    return reverse(name, args=[event.id]) if name in per_event else reverse(name)


@pytest.mark.parametrize("name", PAGES)
def test_it_sends_anonymous_users_to_the_login_page_and_back(client, event, name):
    url = _url(name, event)
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"] == f"/accounts/login/?next={url}"


@pytest.mark.parametrize("name", ACTIONS)
def test_an_action_posted_after_the_session_expired_returns_to_its_page_after_login(client, event, name):
    page = reverse("runbook:event", args=[event.id])
    response = client.post(_url(name, event), HTTP_REFERER=f"http://testserver{page}")
    assert response.status_code == 302
    # Not the action's URL: a GET of it after logging in would be a 405.
    assert response["Location"] == f"/accounts/login/?next={page}"


def test_a_foreign_referer_is_not_a_place_to_return_to(client, event):
    url = _url("runbook:follow-up", event)
    response = client.post(url, HTTP_REFERER="https://elsewhere.example/phish")
    assert response["Location"] == "/accounts/login/?next=/"


def test_it_redirects_an_expired_htmx_refresh_to_login_from_the_page_it_was_on(client, event):
    page = reverse("runbook:event", args=[event.id])
    response = client.get(page, HTTP_HX_REQUEST="true", HTTP_HX_CURRENT_URL=f"http://testserver{page}")
    assert response.status_code == 200
    assert response["HX-Redirect"] == f"/accounts/login/?next={page}"


@pytest.mark.parametrize("name", PAGES + ACTIONS)
def test_it_refuses_an_account_without_a_console_role(console, outsider, event, name):
    client = console(outsider)
    url = _url(name, event)
    response = client.post(url) if name in ACTIONS else client.get(url)
    assert response.status_code == 403


@pytest.mark.parametrize("name", ["runbook:events", "runbook:event", "runbook:follow-ups", "runbook:page-review"])
def test_viewers_and_responders_can_read_the_console(console, viewer, responder, event, name):
    for user in (viewer, responder):
        assert console(user).get(_url(name, event)).status_code == 200


@pytest.mark.parametrize("name", ACTIONS)
def test_viewers_cannot_act(console, viewer, event, name):
    response = console(viewer).post(_url(name, event), {"version": 1, "lease_token": 0, "note": "check"})
    assert response.status_code == 403
    assert not AuditEntry.objects.exists()


@pytest.mark.parametrize("name", ACTIONS)
def test_actions_refuse_get(console, responder, event, name):
    assert console(responder).get(_url(name, event)).status_code == 405


def test_raw_statuses_need_their_own_permission(console, viewer, responder, event):
    for user in (viewer, responder):
        assert console(user).get(_url("runbook:raw-statuses", event)).status_code == 403
    assert not AuditEntry.objects.exists()


def test_viewing_raw_statuses_is_audited_with_the_user(console, raw_viewer, event):
    response = console(raw_viewer).get(_url("runbook:raw-statuses", event))
    assert response.status_code == 200
    entry = AuditEntry.objects.get()
    assert (entry.user, entry.action, entry.event_id) == (raw_viewer, AuditAction.VIEW_RAW_STATUS, event.id)


def test_the_raw_statuses_link_is_shown_only_to_those_who_may_follow_it(console, viewer, raw_viewer, event):
    link = reverse("runbook:raw-statuses", args=[event.id])
    assert link not in console(viewer).get(_url("runbook:event", event)).content.decode()
    assert link in console(raw_viewer).get(_url("runbook:event", event)).content.decode()


def test_the_admin_is_for_staff_only(console, responder):
    response = console(responder).get("/admin/")
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")


def test_an_unknown_event_is_a_404(console, viewer):
    assert console(viewer).get(reverse("runbook:event", args=["evt_nope"])).status_code == 404


def test_actions_refuse_a_post_without_the_csrf_token(responder, event):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(responder)
    for name in ACTIONS:
        response = client.post(_url(name, event), {"version": 1, "lease_token": 0, "note": "check"})
        assert response.status_code == 403
    assert not AuditEntry.objects.exists()


def test_logging_in_lands_on_the_open_events(client, responder):
    response = client.post(
        "/accounts/login/", {"username": "rita", "password": "correct horse battery staple"}, follow=True
    )
    assert response.redirect_chain[-1][0] == reverse("runbook:events")
    assert b"Open events" in response.content


def test_migrating_creates_the_two_roles_with_their_permissions(db):
    from django.contrib.auth.models import Group

    def codenames(name):
        return set(Group.objects.get(name=name).permissions.values_list("codename", flat=True))

    assert codenames("responders") == {"view_console", "act_on_events"}
    assert codenames("viewers") == {"view_console"}
