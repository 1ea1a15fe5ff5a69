"""Own lanes: each periodic job routed to a queue of its own, and every layout consumes every queue."""

import re
from pathlib import Path

import pytest

from config import lanes
from config.celery import app

DEPLOY = Path(__file__).resolve().parent.parent.parent / "deploy"
# The names queued messages, routes and the beat schedule call the tasks by: a message already on
# a queue names its task, so renaming a Python function must not change these.
WIRE_NAMES = {
    "notify.advance",
    "notify.sweep",
    "notify.roll_up_metrics",
    "notify.purge_retained_data",
    "runbook.evaluate_risk",
    "runbook.deliver_pages",
    "runbook.project_policy",
}


def _registered_task_names() -> set[str]:
    # What a worker registers when it starts: every app's tasks module, found by autodiscovery.
    app.loader.import_default_modules()
    return {name for name in app.tasks if not name.startswith("celery.")}


def test_the_registered_tasks_are_exactly_the_wire_names():
    assert _registered_task_names() == WIRE_NAMES


def test_every_routed_or_scheduled_task_is_a_registered_one():
    named = set(lanes.ROUTES) | {entry["task"] for entry in app.conf.beat_schedule.values()}
    assert named <= _registered_task_names()


def test_each_periodic_job_is_routed_to_its_own_lane_and_steps_stay_on_the_default_queue():
    def queue_of(task: str) -> str:
        route = app.amqp.router.route({}, task)
        return str(route["queue"].name)

    assert queue_of("notify.advance") == lanes.STEP_QUEUE
    for task in app.conf.beat_schedule.values():
        assert queue_of(task["task"]) != lanes.STEP_QUEUE, task["task"]
    assert queue_of("notify.sweep") != queue_of("runbook.deliver_pages")  # a pager outage cannot stall sweeps


@pytest.mark.parametrize("procfile", ["Procfile.demo", "Procfile.production"])
def test_every_layout_runs_a_worker_for_the_steps_and_every_lane_and_pages_alone(procfile):
    consumed: list[set[str]] = []
    for line in (DEPLOY / procfile).read_text().splitlines():
        if "celery -A config worker" in line:
            named = re.search(r"-Q (\S+)", line)
            consumed.append(set(named.group(1).split(",")) if named else {lanes.STEP_QUEUE})
    assert set().union(*consumed) == {lanes.STEP_QUEUE, *lanes.LANES}
    # A pager outage holds the slots of the process that delivers pages: it must do nothing else.
    assert {"pages"} in consumed
