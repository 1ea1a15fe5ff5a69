"""Service tokens: created from the CLI or admin, shown once, stored as a digest, revocable."""

import io

import pytest
from django.contrib.auth.models import User
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


def test_admin_creates_a_token_and_shows_it_once(staff):
    answer = staff.post("/admin/notify/servicetoken/add/", {"service": "billing", "label": "batch"}, follow=True)

    shown = [str(message) for message in answer.context["messages"]]
    token = shown[0].split("Token for billing: ")[1].split(" ")[0]
    assert ServiceToken.objects.get().digest == digest(token)
    assert token not in staff.get("/admin/notify/servicetoken/").content.decode()


def test_admin_revokes_tokens_at_once(staff):
    _, token = ServiceToken.issue("billing", now=timezone.now())
    row = ServiceToken.objects.get()

    staff.post("/admin/notify/servicetoken/", {"action": "revoke", "_selected_action": [row.pk]})

    assert ServiceToken.objects.get().revoked
    answer = staff.get("/api/v1/whoami", headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 401
