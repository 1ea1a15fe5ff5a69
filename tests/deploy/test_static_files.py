"""The web process serves the console's assets itself, as the production storage names them: by their
content's hash, compressed, cached for a year, all from its own origin (the policy allows no other:
tests/runbook/test_security.py)."""

import importlib
import os
import re

import pytest
from django.core.management import call_command
from django.test import Client

HASHED = re.compile(r"\.[0-9a-f]{12}\.(css|js|svg)$")


@pytest.fixture
def collected(settings, tmp_path):
    """The settings module's own storage with its files collected, as the deploy does (docs/operations.md).

    Its own: the suite links plain names (tests/conftest.py).
    """
    settings.STORAGES = importlib.import_module(os.environ["DJANGO_SETTINGS_MODULE"]).STORAGES
    settings.STATIC_ROOT = tmp_path / "static"
    call_command("collectstatic", "--no-input", verbosity=0)
    # A client made now: WhiteNoise reads what was collected when its middleware starts.
    return Client()


def _assets(page: str) -> list[str]:
    return re.findall(r'<(?:link|script)[^>]*(?:href|src)="(/static/[^"]+)"', page)


def test_the_console_links_its_assets_by_their_content_hash_from_its_own_origin(db, collected):
    page = collected.get("/accounts/login/").content.decode()

    assets = _assets(page)
    assert [HASHED.sub(r".\1", asset) for asset in assets] == [
        "/static/runbook/favicon.svg",
        "/static/runbook/console.css",
        "/static/django_htmx/htmx-2.min.js",
        "/static/runbook/console.js",
    ]
    assert all(HASHED.search(asset) for asset in assets)


def test_the_web_process_serves_each_asset_compressed_and_cached_for_a_year(db, collected):
    for asset in _assets(collected.get("/accounts/login/").content.decode()):
        response = collected.get(asset, HTTP_ACCEPT_ENCODING="gzip")

        assert response.status_code == 200, asset
        assert response["Cache-Control"] == "max-age=315360000, public, immutable", asset
        assert response["Content-Encoding"] == "gzip", asset
        assert response["Vary"] == "Accept-Encoding", asset
