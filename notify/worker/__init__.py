"""The worker: steps events through the actions due, holding each one's lease.

``turns`` takes an event (the most urgent due one, whichever wake-up brought the worker)
and loops over what is due; ``actions`` performs each action against the providers and
records its outcome through ``notify.writes``.
"""

from notify.worker.turns import MAX_ACTIONS_PER_STEP, StepReport, step_backoff, step_event, step_most_urgent

__all__ = ["MAX_ACTIONS_PER_STEP", "StepReport", "step_backoff", "step_event", "step_most_urgent"]
