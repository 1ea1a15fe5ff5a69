"""The paths programs call (the API, Twilio's callbacks) skip the console's middleware; people's pages keep it."""

import pytest
from django.contrib.auth.models import User
from django.core import checks
from django.test import RequestFactory

from config.middleware import for_machine
from tests.api.payloads import body, post


@pytest.fixture(autouse=True)
def published(policy):
    return policy


def assert_machine_answer(response):
    assert "Content-Security-Policy" not in response.headers
    assert not response.cookies, "a machine answer sets no cookie"
    assert not hasattr(response.wsgi_request, "session")
    assert not hasattr(response.wsgi_request, "user")
    # SecurityMiddleware and X-Frame-Options still run on every path.
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["X-Frame-Options"] == "DENY"


def test_a_creation_is_answered_without_session_user_cookie_or_page_headers(api):
    response = post(api, body())

    assert response.status_code == 201
    assert_machine_answer(response)


def test_whoami_is_answered_without_session_user_cookie_or_page_headers(api):
    response = api.get("/api/v1/whoami")

    assert response.status_code == 200
    assert response.json()["service"] == "accounts"
    assert_machine_answer(response)


def test_a_refused_callback_is_answered_without_session_user_cookie_or_csp(api, client):
    event_id = post(api, body()).json()["event_id"]

    response = client.post(f"/callbacks/twilio/sms/{event_id}", {"MessageSid": "SM1", "MessageStatus": "delivered"})

    assert response.status_code == 403
    assert_machine_answer(response)


@pytest.mark.parametrize("path", ["/accounts/login/", "/api/v1/docs"])
def test_pages_people_open_keep_their_csp_and_framing_headers(client, path):
    response = client.get(path)

    assert response.status_code == 200
    assert response.headers["X-Frame-Options"] == "DENY"
    assert "frame-ancestors 'none'" in response.headers["Content-Security-Policy"]


def test_the_console_still_knows_who_is_logged_in(client, db):
    user = User.objects.create_user("nina", password="correct horse battery staple")
    client.force_login(user)

    response = client.get("/")

    assert response.wsgi_request.user == user
    assert hasattr(response.wsgi_request, "htmx")


def test_the_admin_accepts_the_console_only_middleware(db):
    # admin.E408-E410: the admin needs sessions, authentication and messages middleware.
    ids = {message.id for message in checks.run_checks(tags=[checks.Tags.admin])}

    assert not ids & {"admin.E408", "admin.E409", "admin.E410"}


@pytest.mark.parametrize(
    ("path", "machine"),
    [
        ("/api/v1/events", True),
        ("/api/v1/events/ev_1", True),
        ("/api/v1/whoami", True),
        ("/callbacks/twilio/sms/ev_1", True),
        ("/api/v1/docs", False),
        ("/api/v1/openapi.json", False),
        ("/events/ev_1", False),
        ("/admin/", False),
        ("/", False),
    ],
)
def test_only_the_api_and_callbacks_are_machine_paths(path, machine):
    assert for_machine(RequestFactory().get(path)) is machine
