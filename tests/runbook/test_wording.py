"""The console's one vocabulary for outcomes: every kind worded, our own words only, the most specific first."""

import pytest

from notify.models import Observation
from notify.rules.vocabulary import Channel, Normalized
from runbook.console import wording


def _of(normalized, channel=Channel.SMS, raw_status=""):
    return wording.of(Observation(normalized=normalized, channel=channel, raw_status=raw_status))


@pytest.mark.parametrize("normalized", list(Normalized))
def test_every_normalized_status_has_wording_of_its_own(normalized):
    # Not the stop-gap for a kind the console does not know: a new kind must be worded here.
    assert (normalized.value, None, "") in wording.WORDING


def test_our_own_word_is_read_only_with_the_status_and_channel_it_belongs_to():
    assert _of(Normalized.NO_USEFUL_LIFE, Channel.EMAIL, "").kind == "no_useful_life"  # raw status purged
    assert _of(Normalized.TERMINAL_FAILURE, Channel.SMS, "no_useful_life").kind == "terminal_failure"
    assert _of(Normalized.REJECTED, Channel.EMAIL, "no_useful_life").kind == "rejected"


@pytest.mark.parametrize(
    ("normalized", "raw_status"),
    [
        (Normalized.CONFIGURATION_ERROR, "http_401_20003"),
        (Normalized.CONFIGURATION_ERROR, "smtp_535"),
        (Normalized.TERMINAL_FAILURE, "undelivered"),
        (Normalized.UNKNOWN_OUTCOME, "http_503"),
    ],
)
def test_a_providers_raw_status_is_never_part_of_the_wording(normalized, raw_status):
    said = _of(normalized, Channel.SMS, raw_status)
    assert said == _of(normalized, Channel.SMS)
    assert raw_status not in f"{said.kind} {said.label} {said.meaning}"


def test_a_kind_the_console_does_not_know_yet_reads_as_its_own_words():
    assert _of("lost_in_space") == wording.Worded("lost_in_space", "lost in space")
