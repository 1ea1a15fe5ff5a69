"""/metrics answers only the bearer token Prometheus is given; without a configured token, nobody."""

import hmac
import json
import os
import subprocess
import sys

import pytest

from runbook.metrics import endpoint
from simulator.process import REPO_ROOT

TOKEN = "test-only-metrics-token-0123456789abcdef"


@pytest.fixture(autouse=True)
def metrics_token(settings):
    settings.METRICS_TOKEN = TOKEN


def scrape(client, authorization=None):
    return client.get("/metrics", headers={"Authorization": authorization} if authorization else {})


def test_the_right_bearer_token_gets_the_exposition(db, client):
    response = scrape(client, f"Bearer {TOKEN}")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    body = response.content.decode()
    assert "reset_delivery_metrics_database_up" in body
    assert "django_http_requests_total_by_method" in body


def test_the_scheme_is_case_insensitive_as_http_says(db, client):
    assert scrape(client, f"bearer {TOKEN}").status_code == 200


def test_a_scrape_without_a_token_is_challenged_for_a_bearer_token(client):
    response = scrape(client)

    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert "reset_delivery" not in response.content.decode()


@pytest.mark.parametrize(
    "authorization",
    [f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}", "Bearer ", f"Basic {TOKEN}", TOKEN, f"Token {TOKEN}"],
)
def test_a_wrong_token_or_scheme_is_refused(client, authorization):
    response = scrape(client, authorization)

    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert "reset_delivery" not in response.content.decode()


@pytest.mark.parametrize("configured", [None, ""])
@pytest.mark.parametrize("authorization", [None, "Bearer ", "Bearer None"])
def test_without_a_configured_token_every_scrape_is_refused(client, settings, configured, authorization):
    settings.METRICS_TOKEN = configured

    response = scrape(client, authorization)

    assert response.status_code == 403
    assert "METRICS_TOKEN" in response.content.decode()


def test_the_token_is_compared_in_constant_time(client, monkeypatch):
    compared, compare = [], hmac.compare_digest

    def spy(a, b):
        compared.append((a, b))
        return compare(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)

    scrape(client, "Bearer not-the-token")

    assert (b"not-the-token", TOKEN.encode()) in compared


def test_the_token_is_not_written_to_the_log(db, client, caplog):
    scrape(client, "Bearer a-guess-that-must-not-be-logged")
    scrape(client, f"Bearer {TOKEN}")

    assert "a-guess-that-must-not-be-logged" not in caplog.text
    assert TOKEN not in caplog.text


def test_the_embedded_default_generates_a_metrics_token_of_its_own(tmp_path):
    environment = {"PATH": os.environ["PATH"], "NOTIFY_VAR_DIR": str(tmp_path)}
    printed = subprocess.run(
        [sys.executable, "-c", "from django.conf import settings; print(settings.METRICS_TOKEN)"],
        cwd=REPO_ROOT,
        env={**environment, "DJANGO_SETTINGS_MODULE": "config.settings"},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )

    generated = json.loads((tmp_path / "dev-secrets.json").read_text())["metrics_token"]
    assert printed.stdout.strip() == generated
    assert len(generated) >= endpoint.MINIMUM_TOKEN_LENGTH
