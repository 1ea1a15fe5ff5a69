"""A step's wake-up on the broker: the message Celery itself would send, on the step queue.

These talk to the configured broker (Redis under `make test`, the filesystem broker on the
embedded default) and read back what was published with kombu, as a worker would; one talks
to `make test`'s own RabbitMQ, where only the publish retry policy survives a closed connection.
"""

import contextlib
import logging
import os
import socket
import subprocess
import threading
import time
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

import pytest
import redis
from django.conf import settings
from django.db import connection
from django.utils import timezone
from kombu import Connection
from kombu.transport import redis as kombu_redis

from config.celery import app
from config.lanes import STEP_QUEUE
from notify import broker, tasks
from notify.models import Event
from notify.writes import wake_ups
from tests.factories import new_event

EVENT_ID = "evt_01TESTBROKERWAKEUP0000000"


@pytest.fixture
def step_queue():
    with app.connection_for_read() as connection:
        queue = connection.SimpleQueue(STEP_QUEUE)
        queue.clear()
        yield queue
        queue.clear()
        queue.close()


def received(queue, count):
    messages = [queue.get(timeout=5) for _ in range(count)]
    for message in messages:
        message.ack()
    return messages


# What differs between two messages for the same task: each one's own id and where it was sent from.
OWN = {"id", "root_id", "origin"}


def test_a_wake_up_is_the_message_apply_async_sends(step_queue):
    tasks.take_turn.apply_async((EVENT_ID,))
    broker.publish_advance(EVENT_ID)

    by_celery, ours = received(step_queue, 2)

    assert ours.payload == by_celery.payload == [[EVENT_ID], {}, ours.payload[2]]
    assert {k: v for k, v in ours.headers.items() if k not in OWN} == {
        k: v for k, v in by_celery.headers.items() if k not in OWN
    }
    assert ours.headers["task"] == "notify.advance"
    assert ours.headers["ignore_result"] is True
    assert ours.delivery_info["routing_key"] == by_celery.delivery_info["routing_key"] == STEP_QUEUE
    for name in ("content_type", "content_encoding"):
        assert getattr(ours, name) == getattr(by_celery, name)
    assert ours.properties["delivery_mode"] == by_celery.properties["delivery_mode"] == 2


def test_a_wake_up_sent_says_it_went(step_queue):
    assert wake_ups.publish(EVENT_ID) is True

    (message,) = received(step_queue, 1)

    assert message.payload[0] == [EVENT_ID]


def test_a_wake_up_with_a_countdown_is_due_that_much_later(step_queue):
    before = datetime.now(UTC)
    broker.publish_advance(EVENT_ID, countdown=30)
    after = datetime.now(UTC)

    (message,) = received(step_queue, 1)

    eta = datetime.fromisoformat(message.headers["eta"])
    assert before + timedelta(seconds=30) <= eta <= after + timedelta(seconds=30)


@pytest.mark.skipif(not settings.CELERY_BROKER_URL.startswith("redis://"), reason="drops Redis's connections")
def test_a_wake_up_after_the_broker_dropped_the_connection_still_arrives(step_queue):
    broker.publish_advance(EVENT_ID)
    # The broker restarts, or an idle timeout closes the kept connection: every client but this one.
    redis.Redis.from_url(settings.CELERY_BROKER_URL).client_kill_filter(_type="normal", skipme=True)

    broker.publish_advance(EVENT_ID)

    assert [message.payload[0] for message in received(step_queue, 2)] == [[EVENT_ID], [EVENT_ID]]


# make test's own RabbitMQ (deploy/test-services.sh): its connections may all be closed.
TEST_AMQP = os.environ.get("TEST_AMQP", "")
TEST_RABBITMQ_NODE = os.environ.get("TEST_RABBITMQ_NODE", "")


@pytest.mark.skipif(not TEST_AMQP, reason="needs make test's own RabbitMQ (TEST_AMQP)")
def test_a_wake_up_after_rabbitmq_closed_the_connection_still_arrives(monkeypatch):
    # RabbitMQ closes a client's connection when it restarts, fails over, or an operator forces it.
    # The next publish meets CONNECTION_FORCED: only the retry policy's reconnect delivers it (this
    # fails with task_publish_retry off). The publishes run in a thread of their own, on a new
    # producer for this broker.
    monkeypatch.setenv("CELERY_BROKER_WRITE_URL", TEST_AMQP)
    with Connection(TEST_AMQP) as before:
        before.SimpleQueue(STEP_QUEUE).clear()
    failures = []

    def publish_around_a_forced_close() -> None:
        try:
            broker.publish_advance(EVENT_ID)
            node = ["-n", TEST_RABBITMQ_NODE] if TEST_RABBITMQ_NODE else []
            subprocess.run(["rabbitmqctl", *node, "close_all_connections", "test"], check=True, capture_output=True)
            broker.publish_advance(EVENT_ID)
        except Exception as error:  # surfaced below
            failures.append(error)

    publisher = threading.Thread(target=publish_around_a_forced_close)
    publisher.start()
    publisher.join(timeout=60)

    assert failures == []
    with Connection(TEST_AMQP) as after:  # opened after the close, which would have closed it too
        queue = after.SimpleQueue(STEP_QUEUE)
        assert [message.payload[0] for message in received(queue, 2)] == [[EVENT_ID], [EVENT_ID]]
        queue.close()


def test_a_forked_child_publishes_on_a_connection_of_its_own(step_queue):
    broker.publish_advance(EVENT_ID)
    parents = broker._producer().connection
    child = os.fork()
    if child == 0:  # the child: exit with 0 only if it neither reused the socket nor failed to publish
        try:
            broker.publish_advance(EVENT_ID)
            os._exit(0 if broker._producer().connection is not parents else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(child, 0)

    assert os.waitstatus_to_exitcode(status) == 0
    assert len(received(step_queue, 2)) == 2


def test_an_unreachable_broker_costs_the_hint_not_the_request(monkeypatch, caplog):
    # A port nothing listens on: the hint is lost (the sweeper finds the event later) and
    # the caller goes on. A thread of its own, so that no producer of this thread is reused.
    monkeypatch.setenv("CELERY_BROKER_WRITE_URL", "redis://127.0.0.1:9/0")
    returned = []

    def send() -> None:
        wake_ups.publish(EVENT_ID)
        returned.append(True)

    sender = threading.Thread(target=send)

    with caplog.at_level(logging.WARNING, logger="notify.tasks"):
        sender.start()
        sender.join(timeout=30)

    assert returned == [True]
    (record,) = [record for record in caplog.records if record.getMessage() == "wake_up_not_sent"]
    assert record.event_id == EVENT_ID
    assert record.error == "OperationalError"


def test_a_broker_that_never_answers_costs_the_hint_not_the_request(monkeypatch, caplog, silent_server):
    # A Redis that accepts connections and never answers (stopped, or wedged): the first wake-up
    # waits out NOTIFY_BROKER_PUBLISH_TIMEOUT and is lost (the sweeper finds the event later);
    # the next ones are not even tried for NOTIFY_BROKER_RETRY_SECONDS. Without the timeout the
    # first held its caller for ever; without the pause each one waited out the timeout again.
    monkeypatch.setenv("CELERY_BROKER_WRITE_URL", silent_server.url)
    returned = []

    def send_three() -> None:
        for _ in range(3):
            returned.append(wake_ups.publish(EVENT_ID))

    sender = threading.Thread(target=send_three)  # a thread of its own: a producer of its own

    with caplog.at_level(logging.WARNING, logger="notify.tasks"):
        sender.start()
        sender.join(timeout=30)

    assert returned == [False, False, False]  # each returned, and said it did not go
    errors = [record.error for record in caplog.records if record.getMessage() == "wake_up_not_sent"]
    assert errors == ["OperationalError", "paused", "paused"]
    assert len(silent_server.accepted) == 1  # the broker was asked once


def test_the_sweeper_leaves_what_a_broker_that_hangs_did_not_take_for_its_next_run(
    transactional_db, policy, monkeypatch, silent_server
):
    # Marked woken with no hint on its way, an event would rest NOTIFY_SWEEP_REDELIVER_AFTER
    # (10 s) before a sweep tried it again, however soon the broker came back.
    monkeypatch.setenv("CELERY_BROKER_WRITE_URL", silent_server.url)
    created = [new_event(timezone.now()) for _ in range(3)]
    swept = []

    def sweep() -> None:  # a thread of its own: a producer of its own
        try:
            swept.append(tasks.sweep())
        finally:
            connection.close()

    sweeper = threading.Thread(target=sweep)
    sweeper.start()
    sweeper.join(timeout=30)

    assert swept == [{"enqueued": 0, "expired": 0}]
    assert len(silent_server.accepted) == 1  # one tried and lost; the others paused
    assert (
        list(Event.objects.filter(pk__in=[event.id for event in created]).values_list("wake_at", flat=True))
        == [None] * 3
    )


def test_wake_ups_sent_at_once_do_not_wait_for_each_other(monkeypatch, silent_server):
    # Each thread publishes on its own producer: none waits its turn behind another's publish.
    # (The circuit breaker this once went through held its lock across the publish: of four
    # wake-ups sent at once to a broker that hangs, one asked and three waited, then skipped.)
    monkeypatch.setenv("CELERY_BROKER_WRITE_URL", silent_server.url)
    started = threading.Barrier(4)

    def send() -> None:
        started.wait()
        wake_ups.publish(EVENT_ID)

    senders = [threading.Thread(target=send) for _ in range(4)]
    for sender in senders:
        sender.start()
    for sender in senders:
        sender.join(timeout=30)

    assert len(silent_server.accepted) == 4  # all four were in flight together


@pytest.mark.parametrize(
    ("url", "kept"),
    [("redis://127.0.0.1:6379/0", True), ("rediss://127.0.0.1:6380/0", False), ("amqp://127.0.0.1:5672//", False)],
)
def test_only_a_plain_redis_broker_is_published_to_through_a_kept_client(monkeypatch, url, kept):
    # rediss:// keeps kombu's own transport: kombu takes TLS's default from the scheme's name.
    monkeypatch.setenv("CELERY_BROKER_WRITE_URL", url)

    with broker.bounded_connection() as connection:  # not connected: nothing is asked of a server
        assert (connection.get_transport_cls() is broker._KeptClientTransport) is kept


@pytest.mark.skipif(not settings.CELERY_BROKER_URL.startswith("redis://"), reason="Redis's own put")
def test_a_message_put_on_the_kept_connection_is_what_kombus_own_put_writes(step_queue):
    # The kept connection spares the pool's lend and return per publish; what reaches Redis must
    # be exactly what kombu would have written through a client.
    broker.publish_advance(EVENT_ID)  # opens this thread's producer
    channel = broker._producer().channel
    assert isinstance(channel, broker._KeptClientChannel)
    assert "_kept_connection" in vars(channel)  # the wake-up went through it, not through the pool
    message = {"body": "e30=", "headers": {"id": "one"}, "properties": {"priority": 0, "delivery_tag": "t"}}
    raw = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    raw.delete("kept-put-check")

    channel._put("kept-put-check", dict(message))
    kombu_redis.Channel._put(channel, "kept-put-check", dict(message))

    ours, kombus = raw.rpop("kept-put-check"), raw.rpop("kept-put-check")
    assert ours == kombus
    assert received(step_queue, 1)[0].payload[0] == [EVENT_ID]


class LateBroker:
    """The test broker behind a proxy that answers the first LPUSH ``delay`` seconds late."""

    def __init__(self, target: str, delay: float) -> None:
        self.target = urlsplit(target)
        self.delay = delay
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.pushed_on: list[int] = []  # the connection (numbered from 1) each LPUSH came on
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.listener.getsockname()[1]}{self.target.path}"

    def _accept(self) -> None:
        number = 0
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:  # closed at teardown
                return
            number += 1
            upstream = socket.create_connection((self.target.hostname, self.target.port or 6379))
            pushed = threading.Event()
            threading.Thread(target=self._requests, args=(client, upstream, number, pushed), daemon=True).start()
            threading.Thread(target=self._answers, args=(upstream, client, number, pushed), daemon=True).start()

    def _requests(self, client: socket.socket, upstream: socket.socket, number: int, pushed: threading.Event) -> None:
        with client, upstream:
            while data := _received(client):
                if b"LPUSH" in data:
                    self.pushed_on.append(number)
                    pushed.set()
                upstream.sendall(data)

    def _answers(self, upstream: socket.socket, client: socket.socket, number: int, pushed: threading.Event) -> None:
        with client, upstream:
            while data := _received(upstream):
                if pushed.is_set() and self.pushed_on[0] == number:
                    time.sleep(self.delay)  # the first LPUSH's answer, and its connection's after it
                _sent(client, data)


def _received(connection: socket.socket) -> bytes:
    try:
        return connection.recv(65536)
    except OSError:
        return b""


def _sent(connection: socket.socket, data: bytes) -> None:
    with contextlib.suppress(OSError):  # the client gave up and closed it
        connection.sendall(data)


@pytest.mark.skipif(not settings.CELERY_BROKER_URL.startswith("redis://"), reason="Redis's own put")
def test_a_wake_up_whose_answer_comes_too_late_is_sent_again_on_a_new_connection(monkeypatch, settings, step_queue):
    # A broker slower than our timeout: the LPUSH's answer comes after we gave up. The connection
    # it came on must not be asked again (its late answer would be read as the next command's):
    # the publish is retried on a new one, and the next publish goes there too.
    settings.NOTIFY_BROKER_PUBLISH_TIMEOUT = 0.2
    late = LateBroker(settings.CELERY_BROKER_URL, delay=0.6)
    monkeypatch.setenv("CELERY_BROKER_WRITE_URL", late.url)
    outcomes = []

    def publish_twice() -> None:  # a thread of its own: a producer of its own, on the late broker
        for _ in range(2):
            try:
                broker.publish_advance(EVENT_ID)
                outcomes.append("sent")
            except Exception as error:  # surfaced below
                outcomes.append(type(error).__name__)

    publisher = threading.Thread(target=publish_twice)
    publisher.start()
    publisher.join(timeout=30)
    late.listener.close()

    assert outcomes == ["sent", "sent"]
    first, retried, second = late.pushed_on
    assert retried != first
    assert second == retried
    # The late one reached the broker too: a duplicate wake-up, which a step turns into a no-op.
    assert [message.payload[0] for message in received(step_queue, 3)] == [[EVENT_ID]] * 3
