"""Settings come from the environment, and a bad value names its variable."""

import os
import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured

from config.env import env_bool, env_float, env_int, env_list


def test_a_malformed_integer_names_its_variable(monkeypatch):
    monkeypatch.setenv("NOTIFY_SOME_LIMIT", "ten")

    with pytest.raises(ImproperlyConfigured, match="NOTIFY_SOME_LIMIT must be an integer"):
        env_int("NOTIFY_SOME_LIMIT", 3)


def test_a_value_below_its_minimum_is_refused(monkeypatch):
    monkeypatch.setenv("NOTIFY_SOME_LIMIT", "0")

    with pytest.raises(ImproperlyConfigured, match="NOTIFY_SOME_LIMIT must be at least 1"):
        env_int("NOTIFY_SOME_LIMIT", 3, minimum=1)


def test_a_malformed_boolean_names_its_variable(monkeypatch):
    monkeypatch.setenv("NOTIFY_FLAG", "maybe")

    with pytest.raises(ImproperlyConfigured, match="NOTIFY_FLAG"):
        env_bool("NOTIFY_FLAG")


def test_values_parse_and_unset_variables_take_their_default(monkeypatch):
    monkeypatch.setenv("NOTIFY_FLAG", "Yes")
    monkeypatch.setenv("NOTIFY_RATE", "2.5")
    monkeypatch.setenv("NOTIFY_HOSTS", "a.example, b.example,")
    monkeypatch.delenv("NOTIFY_UNSET", raising=False)

    assert env_bool("NOTIFY_FLAG") is True
    assert env_float("NOTIFY_RATE", 1.0) == 2.5
    assert env_list("NOTIFY_HOSTS") == ["a.example", "b.example"]
    assert env_int("NOTIFY_UNSET", 7) == 7


def _import_settings(env, code="import config.settings"):
    return subprocess.run(
        [sys.executable, "-c", code],
        env={"PATH": os.environ["PATH"], **env},
        capture_output=True,
        text=True,
        check=False,
    )


# Everything production (a DATABASE_URL) must be given; each refusal below leaves one out.
PRODUCTION = {
    "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/x",
    "DJANGO_SECRET_KEY": "k",
    "NOTIFY_VAULT_KEYS": "UgWBMItqeg32DFaO66oGGC12eKPo0iNjtUu-sNebIlw=",
    "NOTIFY_RECIPIENT_PEPPER": "p",
    "TWILIO_ACCOUNT_SID": "AC" + "0" * 32,
    "TWILIO_AUTH_TOKEN": "t",
    "PUBLIC_BASE_URL": "https://reset.example.org",
    "EMAIL_HOST": "smtp.example.org",
    "CELERY_BROKER_URL": "redis://127.0.0.1:6379/0",
}


def _production_without(name):
    return {key: value for key, value in PRODUCTION.items() if key != name}


def test_a_real_database_requires_explicit_secrets():
    result = _import_settings({"DATABASE_URL": "postgres://postgres@127.0.0.1:5432/x"})

    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY must be set when DATABASE_URL is set" in result.stderr


def test_the_embedded_default_generates_its_own_dev_secrets(tmp_path):
    result = _import_settings({"NOTIFY_VAR_DIR": str(tmp_path)})

    assert result.returncode == 0, result.stderr
    assert (tmp_path / "dev-secrets.json").exists()


def test_a_real_database_requires_the_public_callback_address():
    result = _import_settings(_production_without("PUBLIC_BASE_URL"))

    assert result.returncode != 0
    assert "PUBLIC_BASE_URL must be set when DATABASE_URL is set" in result.stderr


def test_production_starts_with_every_required_variable_set():
    result = _import_settings(PRODUCTION, "import config.settings as s; print(s.EMAIL_HOST, s.TWILIO_ACCOUNT_SID)")

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [PRODUCTION["EMAIL_HOST"], PRODUCTION["TWILIO_ACCOUNT_SID"]]


@pytest.mark.parametrize("name", ["TWILIO_ACCOUNT_SID", "EMAIL_HOST"])
@pytest.mark.parametrize("unset_as", ["missing", "empty"])
def test_production_refuses_to_start_without_a_provider_account(name, unset_as):
    environment = _production_without(name) | ({name: ""} if unset_as == "empty" else {})

    result = _import_settings(environment)

    assert result.returncode != 0
    assert f"ImproperlyConfigured: {name} must be set when DATABASE_URL is set" in result.stderr


def test_the_embedded_default_uses_the_simulator_account_and_smtp_sink(tmp_path):
    result = _import_settings(
        {"NOTIFY_VAR_DIR": str(tmp_path)}, "import config.settings as s; print(s.EMAIL_HOST, s.TWILIO_ACCOUNT_SID)"
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["127.0.0.1", "AC" + "5" * 32]


@pytest.mark.parametrize(("setting", "threshold"), [(None, "0"), ("true", "0"), ("false", "None")])
def test_prepared_statements_are_on_unless_turned_off_for_a_pooler(setting, threshold):
    env = PRODUCTION if setting is None else {**PRODUCTION, "DATABASE_PREPARED_STATEMENTS": setting}
    code = "import config.settings as s; print(s.DATABASES['default'].get('OPTIONS', {}).get('prepare_threshold'))"

    result = _import_settings(env, code)

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == threshold
