"""The control endpoints, through SimulatorControl and raw HTTP."""

import json
import urllib.error
import urllib.request

import pytest

from simulator.control import SimulatorControl, SimulatorControlError

TO = "+15551230001"


def test_counts_start_empty(simulator):
    assert simulator.control.counts() == {
        "sms": {},
        "email": {},
        "callbacks_sent": 0,
        "sms_rejected": 0,
        "email_rejected": 0,
        "sms_accepted_late": 0,
        "smtp_paced_connections": 0,
        "smtp_connections": 0,
        "sms_api_connections": 0,
    }


def test_reset_forgets_messages_and_counts(simulator, twilio):
    simulator.control.script_sms(TO, create=["accept", "reject"], statuses=[])
    twilio.messages.create(to=TO, from_="+15550000000", body="Your reset link")

    simulator.control.reset()

    assert simulator.control.counts()["sms"] == {}
    assert twilio.messages.list(to=TO) == []


def test_an_invalid_script_is_refused_with_the_reason(simulator):
    with pytest.raises(SimulatorControlError, match="create: 'explode' is not one of"):
        simulator.control.script_sms(TO, create=["explode"])


def test_a_script_that_is_not_json_is_refused_with_400(simulator):
    request = urllib.request.Request(f"{simulator.base_url}/simulator/script", data=b"{not json", method="POST")

    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=5)

    assert refused.value.code == 400
    assert json.loads(refused.value.read()) == {"error": "the body must be a JSON object"}


def test_waiting_for_a_simulator_that_is_not_there_times_out():
    with pytest.raises(TimeoutError):
        SimulatorControl("http://127.0.0.1:9").wait_until_up(timeout=0.2)
