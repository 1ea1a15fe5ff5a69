import copy
import re
import tomllib
from collections.abc import Callable
from typing import Any

import pytest

from simulator.faults import CreateFault, FinalStatus, SmtpFault
from simulator.profile import DEFAULT_PROFILE, ProfileError, load_profile, parse_profile


def default_document() -> dict[str, Any]:
    return tomllib.loads(DEFAULT_PROFILE.read_text())


def test_the_default_profile_loads():
    profile = load_profile(DEFAULT_PROFILE)

    assert {region.name for region in profile.regions} == {"us", "eu"}
    assert profile.smtp.faults[SmtpFault.ACCEPT] > 0.95


def test_the_default_profile_mostly_delivers_us_messages():
    us = load_profile(DEFAULT_PROFILE).region_for("+15551230001")

    assert us.outcomes[FinalStatus.DELIVERED] / sum(us.outcomes.values()) == pytest.approx(0.90)
    assert us.create_faults[CreateFault.ACCEPT] > 0.98


@pytest.mark.parametrize(
    ("to", "region"),
    [("+15551230001", "us"), ("+447700900123", "eu"), ("+4915112345678", "eu"), ("+81312345678", "fallback")],
)
def test_a_destination_gets_the_region_of_its_prefix(to, region):
    assert load_profile(DEFAULT_PROFILE).region_for(to).name == region


def test_the_longest_matching_prefix_wins():
    document = default_document()
    document["sms"]["regions"]["pr"] = copy.deepcopy(document["sms"]["regions"]["us"]) | {"prefixes": ["+1787"]}

    assert parse_profile(document).region_for("+17875550100").name == "pr"


def test_fault_probabilities_leave_the_rest_to_the_fault_free_behaviour():
    document = default_document()
    document["sms"]["fallback"]["create_faults"] = {"reject": 0.25, "hang": 0.25}

    faults = parse_profile(document).fallback.create_faults

    assert faults[CreateFault.ACCEPT] == 0.5
    assert faults[CreateFault.SERVER_ERROR] == 0.0


DELETE = object()


def _set(path: str, value: object) -> Callable[[dict[str, Any]], None]:
    """Return an edit of the document that sets (or, given DELETE, removes) the dotted ``path``."""
    *parents, leaf = path.split(".")

    def mutate(document: dict[str, Any]) -> None:
        table = document
        for key in parents:
            table = table[key]
        if value is DELETE:
            del table[leaf]
        else:
            table[leaf] = value

    return mutate


@pytest.mark.parametrize(
    ("mutate", "error"),
    [
        (_set("sms.fallback.create_faults.reject", 1.5), "sms.fallback.create_faults.reject: must be a probability"),
        (
            _set("sms.regions.us.callback_faults.drop", -0.1),
            "sms.regions.us.callback_faults.drop: must not be negative",
        ),
        (_set("sms.regions.eu.create_faults.hang", 0.99), "sms.regions.eu.create_faults: probabilities add up to"),
        (_set("sms.regions.us.create_faults.explode", 0.1), "sms.regions.us.create_faults.explode: unknown key"),
        (_set("sms.regions.us.colour", "red"), "sms.regions.us.colour: unknown key"),
        (_set("smtp.faults.hang", "often"), "smtp.faults.hang: must be a number"),
        (_set("smtp.faults.hang", True), "smtp.faults.hang: must be a number"),
        (_set("sms.regions.us.outcomes.delivered", -1), "sms.regions.us.outcomes.delivered: must not be negative"),
        (
            _set("sms.regions.us.outcomes", {"delivered": 0, "failed": 0}),
            "sms.regions.us.outcomes: at least one weight must be positive",
        ),
        (
            _set("sms.fallback.sent_latency.median_seconds", 0),
            "sms.fallback.sent_latency.median_seconds: must be positive",
        ),
        (_set("sms.fallback.receipt_latency", DELETE), "sms.fallback.receipt_latency: missing"),
        (_set("sms.regions.us.prefixes", []), "sms.regions.us.prefixes: must be a non-empty list"),
        (_set("sms.regions.us.prefixes", ["1"]), "sms.regions.us.prefixes: '1' is not a prefix"),
        (_set("sms.regions.eu.prefixes", ["+1"]), "sms.regions.eu.prefixes: +1 is also in us"),
        (_set("sms.fallback.prefixes", ["+1"]), "sms.fallback.prefixes: unknown key"),
        (_set("smtp.hang_seconds", 0), "smtp.hang_seconds: must be positive"),
    ],
)
def test_an_invalid_profile_is_refused_naming_the_field(mutate, error):
    document = default_document()
    mutate(document)

    with pytest.raises(ProfileError, match="^" + re.escape(error)):
        parse_profile(document)


def test_an_unreadable_profile_is_refused_naming_the_file(tmp_path):
    path = tmp_path / "broken.toml"
    path.write_text("[sms\n")

    with pytest.raises(ProfileError, match=r"broken\.toml"):
        load_profile(path)
