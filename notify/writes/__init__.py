"""Everything that writes an event: its state, claims, leases and wake-ups, one module per use case.

- ``create``: a service's request becomes an event (the API).
- ``moves``: evidence recorded, the email claimed, the event expired (everyone, through ``cas``).
- ``operator``: a responder's release, claim and note (the console).
- ``leases``, ``intent``: a worker takes, holds and gives back an event, and commits its intent
  before each provider call (the worker).
- ``sweeper``: due events whose wake-up was lost; ``purge``: what retention forgets.

Each write returns what happens next (``cas.Written``: its effect, the event after it, what is
due, the wake-up) and sends that wake-up itself, after commit, through the one sender
(``wake_ups.send_after_commit``). Under them: ``cas`` (the compare-and-set), ``reads`` and
``sql``. What a write should do is decided in ``notify.rules``, which writes nothing.
"""
