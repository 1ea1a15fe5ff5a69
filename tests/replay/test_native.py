"""The compiled decision code (config.native) replays exactly as its source does.

Compiling is only allowed to make the worker's decisions faster, never different: the same
generated records, replayed by the compiled modules and by their sources, each in a process of
its own, must end with identical outcomes, record for record.
"""

import json
import os
import subprocess
import sys

import pytest

from config import native

# Both plans with SMS, and either channel alone, and a short poll interval: every path the decisions take.
REPLAY = """
import dataclasses, json
from datetime import timedelta
import django
django.setup()
from policies.models import ChannelPlan
from runbook.replay.generate import generate
from runbook.replay.simulate import Shared, simulate
from tests.factories import PolicyVersionFactory
import notify.rules.machine, notify.rules.plan, runbook.replay.record, runbook.replay.simulate

policies = [
    PolicyVersionFactory.build(pk=1, channel_plan=ChannelPlan.SMS_THEN_EMAIL),
    PolicyVersionFactory.build(pk=2, channel_plan=ChannelPlan.SMS_ONLY),
    PolicyVersionFactory.build(pk=3, channel_plan=ChannelPlan.EMAIL_ONLY),
    PolicyVersionFactory.build(pk=4, poll_interval=timedelta(seconds=3), sms_budget=timedelta(seconds=20)),
]
shared = Shared()
records = list(generate(4000, seed=11))
outcomes = [dataclasses.astuple(simulate(timing, policy, shared)) for timing in records for policy in policies]
modules = (notify.rules.machine, notify.rules.plan, runbook.replay.record, runbook.replay.simulate)
print(json.dumps({"files": [module.__file__ for module in modules], "outcomes": outcomes}, default=str))
"""


def replayed(*, compiled: bool) -> dict[str, object]:
    environ = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "NOTIFY_NATIVE": str(compiled).lower()}
    done = subprocess.run(
        [sys.executable, "-c", REPLAY], cwd=native.ROOT, env=environ, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_compiled_decisions_replay_every_record_as_their_source_does():
    if native.current()[0] is None:
        pytest.skip(f"the decision code: {native.current()[1]}")
    source, compiled = replayed(compiled=False), replayed(compiled=True)
    assert all(str(path).endswith(".py") for path in source["files"])  # type: ignore[attr-defined]
    assert all(str(path).endswith(".so") for path in compiled["files"])  # type: ignore[attr-defined]
    # Records end in every way, so the comparison covers more than one path through the decisions.
    assert {"sms_delivered", "email_accepted", "expired"} <= {outcome[0] for outcome in source["outcomes"]}  # type: ignore[attr-defined]
    # Compared as values: the compiled Replayed holds a float field as a float where the source
    # kept the int it was given (a lifetime of 600 s is 600.0 there), which is the same figure.
    assert compiled["outcomes"] == source["outcomes"]
