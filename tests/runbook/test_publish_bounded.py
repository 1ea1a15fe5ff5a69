"""The console's own publishes are hints too: a broker that accepts connections and never answers
costs them, not the admin's save or the risk evaluation that waits on them. Before their publish
had a timeout (notify.broker.bounded_connection), each of these waited on such a broker for ever."""

import logging
import threading

from runbook import tasks
from runbook.evidence import projections


def returned_within(call, seconds: float = 30) -> bool:
    """Run ``call`` in a thread of its own; whether it returned within ``seconds`` (a hung one is left behind)."""
    done = threading.Event()

    def run() -> None:
        call()
        done.set()

    threading.Thread(target=run, daemon=True).start()
    return done.wait(timeout=seconds)


def test_a_draft_projection_request_returns_when_the_broker_never_answers(monkeypatch, caplog, silent_server):
    monkeypatch.setenv("CELERY_BROKER_WRITE_URL", silent_server.url)

    with caplog.at_level(logging.WARNING, logger="runbook.projections"):
        assert returned_within(lambda: projections._enqueue(1))  # the admin's save waits on this

    assert [record.getMessage() for record in caplog.records if record.name == "runbook.projections"] == [
        "projection_not_queued"
    ]
    assert silent_server.accepted  # it was tried


def test_a_page_delivery_shortcut_returns_when_the_broker_never_answers(monkeypatch, caplog, silent_server):
    monkeypatch.setenv("CELERY_BROKER_WRITE_URL", silent_server.url)

    with caplog.at_level(logging.WARNING, logger="runbook.tasks"):
        assert returned_within(tasks._deliver_soon)  # the risk evaluation waits on this; beat delivers anyway

    assert [record.getMessage() for record in caplog.records if record.name == "runbook.tasks"] == [
        "deliver_pages_not_enqueued"
    ]
    assert silent_server.accepted
