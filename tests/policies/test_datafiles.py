"""The shipped policy files load, validate, and resolve to the values that matter per region."""

import io
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command

from policies import datafiles
from policies.models import AlertMode, ChannelPlan, PolicyVersion, Stage


def load_defaults():
    call_command("load_policies", stdout=io.StringIO())


def test_both_regions_ship_as_published_data(db):
    load_defaults()

    assert set(PolicyVersion.objects.filter(status=Stage.PUBLISHED).values_list("region", flat=True)) == {"US", "EU"}
    for version in PolicyVersion.objects.all():
        version.full_clean()
        assert version.source_file.endswith(".toml")
        assert len(version.source_hash) == 64


GOLDEN = {
    "US": {
        "sms_budget": timedelta(seconds=90),
        "fallback_reserve": timedelta(seconds=300),
        "poll_interval": timedelta(seconds=15),
        "vault_retention": timedelta(days=1),
        "max_lifetime": timedelta(hours=1),
        "channel_plan": ChannelPlan.SMS_THEN_EMAIL,
        "alert_mode": AlertMode.OBSERVE,
        "consent_required": False,
    },
    "EU": {
        "sms_budget": timedelta(seconds=120),
        "fallback_reserve": timedelta(seconds=300),
        "poll_interval": timedelta(seconds=20),
        "vault_retention": timedelta(hours=1),
        "max_lifetime": timedelta(hours=1),
        "channel_plan": ChannelPlan.SMS_THEN_EMAIL,
        "alert_mode": AlertMode.OBSERVE,
        "consent_required": True,
    },
}
# Calling codes each region must (and must not) allow an SMS to.
DESTINATIONS = {"US": ({1}, {33, 44}), "EU": ({33, 49, 353}, {1, 44})}


@pytest.mark.parametrize("region", sorted(GOLDEN))
def test_each_region_resolves_to_its_reviewed_values(db, region):
    load_defaults()

    version = PolicyVersion.objects.get(region=region, status=Stage.PUBLISHED)

    assert {name: getattr(version, name) for name in GOLDEN[region]} == GOLDEN[region]
    allowed, refused = DESTINATIONS[region]
    assert allowed <= set(version.allowed_sms_country_codes)
    assert not refused & set(version.allowed_sms_country_codes)


def test_loading_twice_creates_nothing_new(db):
    load_defaults()
    load_defaults()

    assert PolicyVersion.objects.count() == 2


def test_a_changed_file_becomes_a_new_version_and_retires_the_old(db, tmp_path):
    load_defaults()
    changed = tmp_path / "us.toml"
    text = (datafiles.DEFAULTS_DIR / "us.toml").read_text()
    changed.write_text(text.replace("sms_budget_s = 90", "sms_budget_s = 75"))

    call_command("load_policies", str(changed), stdout=io.StringIO())

    versions = list(PolicyVersion.objects.filter(region="US").order_by("number"))
    assert [(v.number, v.status) for v in versions] == [(1, Stage.RETIRED), (2, Stage.PUBLISHED)]
    assert versions[1].sms_budget == timedelta(seconds=75)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("sms_budget_s = 90", "sms_budget_s = 0"), "sms_budget: sms_budget must be positive"),
        (("sms_budget_s = 90", "sms_budget_s = 'soon'"), "sms_budget_s must be a number of seconds"),
        (("poll_cost_s = 2", "poll_cost_s = 2\nretry_storm = true"), "unknown setting 'retry_storm'"),
        (('purpose = "transactional"', 'purpose = "marketing"'), "marketing purpose is refused"),
        (("max_lifetime_s = 3600", "max_lifetime_s = 86401"), "max_lifetime: max_lifetime must be at most 24 hours"),
        (("max_lifetime_s = 3600", ""), "missing max_lifetime"),
    ],
)
def test_a_bad_file_is_refused_naming_the_field_and_loads_nothing(db, tmp_path, edit, message):
    bad = tmp_path / "us.toml"
    bad.write_text((datafiles.DEFAULTS_DIR / "us.toml").read_text().replace(*edit))

    with pytest.raises(CommandError, match=message):
        call_command("load_policies", str(bad))

    assert not PolicyVersion.objects.exists()
