"""Hardening: a strict Content-Security-Policy, local assets only, and deploy checks that pass."""

import os
import re
import secrets
import subprocess
import sys

import pytest
from cryptography.fernet import Fernet
from django.contrib.staticfiles import finders
from django.urls import reverse

from simulator.process import REPO_ROOT
from tests.factories import new_event


@pytest.fixture
def event_page(console, viewer, policy, clock):
    event = new_event(clock.now())
    return console(viewer).get(reverse("runbook:event", args=[event.id]))


def test_console_pages_allow_only_their_own_origin(event_page):
    policy = dict(directive.strip().split(" ", 1) for directive in event_page["Content-Security-Policy"].split(";"))
    assert policy["default-src"] == "'self'"
    assert policy["script-src"] == "'self'"
    assert policy["style-src"] == "'self'"
    assert policy["frame-ancestors"] == "'none'"
    assert policy["img-src"] == "'self'"
    assert "unsafe" not in event_page["Content-Security-Policy"]


def test_the_login_page_sends_the_policy_too(client):
    assert "default-src 'self'" in client.get("/accounts/login/")["Content-Security-Policy"]


@pytest.mark.parametrize("url", ["event", "/", "/follow-ups", "/accounts/login/"])
def test_pages_load_nothing_from_elsewhere_and_nothing_inline(console, viewer, client, event_page, url):
    response = event_page if url == "event" else (client if "login" in url else console(viewer)).get(url)
    body = response.content.decode()
    for link in re.findall(r'(?:src|href)="([^"]*)"', body):
        assert link.startswith(("/", "#", "?")), link
    assert "<style" not in body
    assert " style=" not in body
    assert re.search(r"\son[a-z]+=", body) is None, "an inline event handler"
    assert re.search(r"<script(?![^>]*\ssrc=)[^>]*>", body) is None, "an inline script"


def test_htmx_is_served_locally_and_pinned(event_page):
    scripts = re.findall(r'<script[^>]*src="([^"]+)"', event_page.content.decode())
    # htmx, and the console's own fold toggles: both from our origin, nothing inline.
    assert scripts == ["/static/django_htmx/htmx-2.min.js", "/static/runbook/console.js"]
    path = finders.find("django_htmx/htmx-2.min.js")
    assert path is not None
    with open(path, encoding="utf-8") as file:
        assert 'version:"2.0.' in file.read()


def test_csrf_token_rides_in_hx_headers(event_page):
    assert re.search(r"""<body hx-headers='\{"X-CSRFToken": "[A-Za-z0-9]{64}"\}'>""", event_page.content.decode())


def _deploy_check(**overrides: str) -> subprocess.CompletedProcess[str]:
    environment = {
        "PATH": os.environ["PATH"],
        "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/reset_delivery",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "DJANGO_ALLOWED_HOSTS": "reset.example.org",
        "NOTIFY_VAULT_KEYS": Fernet.generate_key().decode(),
        "NOTIFY_RECIPIENT_PEPPER": "deploy-check-pepper",
        "TWILIO_ACCOUNT_SID": "AC" + "0" * 32,
        "TWILIO_AUTH_TOKEN": "deploy-check-token",
        "EMAIL_HOST": "smtp.example.org",
        "PUBLIC_BASE_URL": "https://reset.example.org",
        "METRICS_TOKEN": secrets.token_urlsafe(32),
        **overrides,
    }
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=REPO_ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_production_settings_pass_the_deploy_check_without_warnings():
    result = _deploy_check()
    assert result.returncode == 0, result.stderr
    assert "System check identified no issues" in result.stdout


def test_the_deploy_check_would_catch_plain_http():
    result = _deploy_check(DJANGO_HTTPS="false")
    assert result.returncode != 0
    assert "SECURE_SSL_REDIRECT" in result.stderr


@pytest.mark.parametrize(("token", "check"), [("", "runbook.W001"), ("short", "runbook.W002")])
def test_the_deploy_check_would_catch_a_missing_or_weak_metrics_token(token, check):
    result = _deploy_check(METRICS_TOKEN=token)
    assert result.returncode != 0
    assert check in result.stderr
