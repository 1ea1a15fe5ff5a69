"""Exporting this project's own history in the timing format."""

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command

from runbook.replay import timings
from runbook.replay.simulate import simulate
from tests.factories import CANARY_EMAIL, CANARY_PHONE, new_event
from tests.notify.workers import run_until_settled, scripted_event

pytestmark = pytest.mark.django_db(transaction=True)


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
        # Delivered: found by the first poll, 10 s after the submit.
        timings.Timing("US", 600, 0, 10, "delivered", 0, "accepted"),
        # No receipt: the email went out at the 60 s deadline and the relay took it at once.
        timings.Timing("US", 600, 0, None, "none", 0, "accepted"),
    ]
    # Replaying the export ends each event as it ended live.
    assert [simulate(row, policy).final_state for row in rows] == ["sms_delivered", "email_accepted"]
    text = out.read_text()
    assert CANARY_PHONE not in text
    assert CANARY_EMAIL not in text
    assert delivered.id not in text


def test_an_export_reaching_past_the_observation_retention_is_refused(tmp_path, policy):
    from django.core.management import CommandError

    # The factory policy keeps observations 14 days.
    with pytest.raises(CommandError, match="reaches past the observation retention"):
        call_command("export_timings", since_hours=15 * 24, out=tmp_path / "t.csv", stdout=StringIO())
    assert not (tmp_path / "t.csv").exists()
