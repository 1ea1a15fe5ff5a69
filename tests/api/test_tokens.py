"""Service tokens: created from the CLI or admin, shown once, stored as a digest, revocable."""

import io
import re

import pytest
from django.contrib import admin
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Permission, User
from django.contrib.sessions.models import Session
from django.core.management import CommandError, call_command
from django.utils import timezone

from notify.models import ServiceToken
from notify.models.service_token import digest


def test_the_cli_prints_a_working_token_once_and_stores_only_its_digest(db, client):
    out, err = io.StringIO(), io.StringIO()

    call_command("create_service_token", "accounts", "--label", "web-1", stdout=out, stderr=err)

    token = out.getvalue().strip()
    stored = ServiceToken.objects.get()
    assert (stored.service, stored.label, stored.digest) == ("accounts", "web-1", digest(token))
    assert token not in str(list(ServiceToken.objects.values()))
    assert "not shown again" in err.getvalue()
    # Only on stdout (for `TOKEN=$(...)`), and once; stderr has just the prefix.
    assert out.getvalue() == token + "\n"
    assert token not in err.getvalue()
    answer = client.get("/api/v1/whoami", headers={"Authorization": f"Bearer {token}"})
    assert answer.json() == {"service": "accounts"}


def test_the_cli_refuses_a_bad_service_name_clearly(db):
    with pytest.raises(CommandError, match="service"):
        call_command("create_service_token", "Accounts Service")

    assert not ServiceToken.objects.exists()


@pytest.fixture
def staff(db, client):
    admin = User.objects.create_superuser("admin", "admin@example.org", "pw")
    client.force_login(admin)
    return client


def _created(staff, **extra):
    answer = staff.post("/admin/notify/servicetoken/add/", {"service": "billing", "label": "batch", **extra})
    token = re.search(r'<code id="issued-token">(rdt_[^<]+)</code>', answer.content.decode())
    assert token is not None, answer.content.decode()
    return answer, token[1]


def test_admin_shows_a_new_token_in_the_answer_to_its_creation(staff):
    answer, token = _created(staff)

    assert answer.status_code == 200
    assert ServiceToken.objects.get().digest == digest(token)
    assert "no-store" in answer["Cache-Control"]
    authorized = staff.get("/api/v1/whoami", headers={"Authorization": f"Bearer {token}"})
    assert authorized.json() == {"service": "billing"}


@pytest.mark.parametrize("button", ["_save", "_continue", "_addanother"])
def test_admin_never_puts_a_new_token_in_a_cookie_or_the_session(staff, button):
    answer, token = _created(staff, **{button: "1"})

    assert all(token not in morsel.OutputString() for morsel in answer.cookies.values())
    assert token not in str(dict(answer.items()))
    assert all(token not in str(session.get_decoded()) for session in Session.objects.all())
    assert token not in str(dict(staff.session.items()))


def test_admin_does_not_show_a_token_again(staff):
    _, token = _created(staff)
    row = ServiceToken.objects.get()

    for page in ("/admin/notify/servicetoken/", f"/admin/notify/servicetoken/{row.pk}/change/", "/admin/"):
        assert token not in staff.get(page).content.decode()
    assert token not in str(list(LogEntry.objects.values()))


def test_admin_revokes_tokens_at_once(staff):
    _, token = ServiceToken.issue("billing", now=timezone.now())
    row = ServiceToken.objects.get()

    staff.post("/admin/notify/servicetoken/", {"action": "revoke", "_selected_action": [row.pk]})

    assert ServiceToken.objects.get().revoked
    answer = staff.get("/api/v1/whoami", headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 401


def test_a_view_only_user_cannot_revoke_a_token(db, client):
    ServiceToken.issue("billing", now=timezone.now())
    viewer = User.objects.create_user("viewer", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_servicetoken"))
    client.force_login(viewer)

    client.post(
        "/admin/notify/servicetoken/", {"action": "revoke", "_selected_action": [ServiceToken.objects.get().pk]}
    )

    assert not ServiceToken.objects.get().revoked


def test_every_admin_action_declares_the_permission_it_needs():
    undeclared = [
        f"{type(model_admin).__name__}.{action}"
        for model_admin in admin.site._registry.values()
        for action in model_admin.actions or ()
        if not getattr(action if callable(action) else getattr(model_admin, action), "allowed_permissions", ())
    ]

    assert undeclared == []
