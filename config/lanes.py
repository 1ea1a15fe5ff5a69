"""The Celery queues: worker steps on the default one, and a lane of its own for each periodic job.

The sweeper, the at-risk evaluation, page delivery and the housekeeping each have a queue of
their own, consumed by worker processes of their own, so no backlog of steps delays or discards
them and no provider or pager outage takes a step's slot. Every process layout (the demo's
Procfile, the chaos run, the benchmarks, the integration tests, production) starts workers for
``LANE_QUEUES`` beside the step workers.
"""

STEP_QUEUE = "celery"
LANES: dict[str, tuple[str, ...]] = {
    "sweeper": ("notify.sweep",),
    "risk": ("runbook.evaluate_risk",),
    "pages": ("runbook.deliver_pages",),
    "maintenance": ("notify.roll_up_metrics", "notify.purge_retained_data"),
    # A policy draft's projection replays up to a week of history: seconds to a minute of CPU
    # that must never hold up the sweeper, the evaluator or the roll-up.
    "projections": ("runbook.project_policy",),
}
ROUTES = {task: {"queue": queue} for queue, tasks in LANES.items() for task in tasks}
# For ``celery worker -Q``.
LANE_QUEUES = ",".join(LANES)
