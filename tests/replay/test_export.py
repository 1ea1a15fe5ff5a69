"""Exporting this project's own history in the timing format."""

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command

from notify.models import Event
from notify.rules.vocabulary import Channel, Normalized, State
from runbook.replay import timings
from runbook.replay.export import answer_word
from runbook.replay.simulate import simulate
from tests.factories import CANARY_EMAIL, CANARY_PHONE, PolicyVersionFactory, new_event
from tests.notify.workers import run_until_settled, scripted_event

pytestmark = pytest.mark.django_db(transaction=True)
ACCEPTED = (timings.Call(0, "accepted"),)


def test_it_exports_what_the_providers_did_and_when(tmp_path, policy, clock, simulator, transports):
    delivered = scripted_event(simulator, clock)
    silent = scripted_event(simulator, clock, statuses=(("sent", 0),), smtp=("accept",))
    for event in (delivered, silent):
        run_until_settled(event.id, transports, clock)
    new_event(clock.now() - timedelta(days=30))  # outside the window: never submitted anyway

    out = tmp_path / "timings.csv"
    call_command("export_timings", since_hours=1, out=out, stdout=StringIO())

    rows = sorted(timings.read(out), key=lambda row: row.sms_outcome)  # shuffled on the way out
    assert rows == [
        # Delivered: found by the first poll (its callback was dropped), 10 s after the submit.
        timings.Timing("US", 600, 0, 10, "delivered", 0, "accepted", "poll", sms_calls=ACCEPTED, sms_segments=1),
        # No receipt: the email went out at the 60 s deadline and the relay took it at once.
        timings.Timing(
            "US", 600, 0, None, "none", 0, "accepted", sms_calls=ACCEPTED, email_calls=ACCEPTED, sms_segments=1
        ),
    ]
    # Replaying the export ends each event as it ended live.
    assert [simulate(row, policy).final_state for row in rows] == ["sms_delivered", "email_accepted"]
    text = out.read_text()
    assert CANARY_PHONE not in text
    assert CANARY_EMAIL not in text
    assert delivered.id not in text


def test_it_exports_the_template_set_and_the_sms_segments_never_the_subscribers_locale(
    tmp_path, clock, simulator, transports
):
    sms = "Σύνδεσμος επαναφοράς κωδικού πρόσβασης: {{ reset_url }}"  # UCS-2: 40 + 49 units, over 70
    greek = {"sms": sms, "email_subject": "Σύνδεσμος", "email_body": "{{ reset_url }}"}
    PolicyVersionFactory(locale_templates={"el": greek})
    event = scripted_event(simulator, clock, locale="el-CY", time_zone="Asia/Nicosia")
    run_until_settled(event.id, transports, clock)

    out = tmp_path / "timings.csv"
    call_command("export_timings", since_hours=1, out=out, stdout=StringIO())

    [row] = timings.read(out)
    assert (row.locale, row.sms_segments) == ("el", 2)
    text = out.read_text()
    assert "el-CY" not in text
    assert "Nicosia" not in text


def test_an_export_reaching_past_the_observation_retention_is_refused(tmp_path, policy):
    from django.core.management import CommandError

    # The factory policy keeps observations 14 days.
    with pytest.raises(CommandError, match="reaches past the observation retention"):
        call_command("export_timings", since_hours=15 * 24, out=tmp_path / "t.csv", stdout=StringIO())
    assert not (tmp_path / "t.csv").exists()


def test_each_call_is_exported_with_its_own_latency_and_answer(tmp_path, clock, simulator, transports, settings):
    # The relay defers the first email (451) and takes the retry 30 s later. As one call from the
    # first attempt to the final answer it would be 30 s long, past the exchange's 20 s deadline,
    # and its replay would invent an unknown outcome and fail; call by call it ends as it did live.
    settings.EMAIL_SEND_DEADLINE = 20
    policy = PolicyVersionFactory.create(email_backoff=timedelta(seconds=30), email_attempt_limit=3)
    deferred = scripted_event(simulator, clock, create=("rate_limited", "reject"), smtp=("temp_fail", "accept"))
    run_until_settled(deferred.id, transports, clock)

    out = tmp_path / "timings.csv"
    call_command("export_timings", since_hours=1, out=out, stdout=StringIO())

    [row] = timings.read(out)
    assert row.sms_calls == (timings.Call(0, "transient"), timings.Call(0, "failed"))
    assert row.email_calls == (timings.Call(0, "transient"), timings.Call(0, "accepted"))
    live = Event.objects.get(pk=deferred.id)
    assert live.state == State.EMAIL_ACCEPTED
    assert simulate(row, policy).final_state == live.state
    # Version 1's measure of the same email, one 30 s call, fails where the live event did not.
    one_slow_call = row._replace(email_calls=(), email_accept_s=30.0)
    assert simulate(one_slow_call, policy).final_state == State.EMAIL_FAILED


@pytest.mark.parametrize(
    ("channel", "normalized", "word"),
    [
        # Twilio answered the create with a terminal status: refused after all, nothing to look up.
        (Channel.SMS, Normalized.TERMINAL_FAILURE, "failed"),
        (Channel.SMS, Normalized.ACCEPTED, "accepted"),
        (Channel.SMS, Normalized.REJECTED, "failed"),
        (Channel.SMS, Normalized.TRANSIENT_ERROR, "transient"),
        (Channel.SMS, Normalized.CONFIGURATION_ERROR, "transient"),
        (Channel.SMS, Normalized.UNKNOWN_OUTCOME, "unknown"),
        (Channel.EMAIL, Normalized.ACCEPTED, "accepted"),
        (Channel.EMAIL, Normalized.REJECTED, "failed"),
        (Channel.EMAIL, Normalized.TRANSIENT_ERROR, "transient"),
        (Channel.EMAIL, Normalized.UNKNOWN_OUTCOME, "unknown"),
        (Channel.EMAIL, Normalized.POSSIBLE_DUPLICATE, "unknown"),
    ],
)
def test_each_call_answer_is_exported_as_what_it_did_to_the_claim(channel, normalized, word):
    assert answer_word(channel, normalized) == word
