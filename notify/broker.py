"""Putting a step's wake-up on the broker: Celery's message, published by a producer kept per thread.

``advance.apply_async`` costs a creation more CPU than anything else it does
(docs/benchmarks.md, "Measured choices"): Celery reads its configuration a
dozen times, routes the task, reprs its arguments, takes a producer from its pool and
copies the queue to bind it, for a message that is the same every time but for its id.
Here the route, the queue and the retry policy are read once; each wake-up has Celery
build its message (``as_task_v2``, so the worker reads exactly what it always did) and
kombu publish it, with the same retry policy, on this thread's own connection.
"""

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache, cached_property
from typing import Any, NamedTuple, Protocol

import redis
from celery import current_app as app
from celery.utils import uuid
from django.conf import settings
from kombu import Connection, Producer
from kombu.transport import redis as kombu_redis
from kombu.utils.json import dumps

ADVANCE = "notify.advance"


class _Publisher(threading.local):
    producer: Producer | None = None
    pid = 0


_publisher = _Publisher()


def publish_advance(event_id: str, *, countdown: float = 0.0) -> None:
    """Put one ``notify.advance(event_id)`` on Celery's default queue (the steps'), due in ``countdown`` seconds.

    Raises kombu's ``OperationalError`` once the configured publish retries are spent.
    """
    conf = _settings()
    headers, properties, body, _ = app.amqp.as_task_v2(
        uuid(),
        ADVANCE,
        (event_id,),
        {},
        countdown=countdown or None,
        ignore_result=conf.ignore_result,
        argsrepr=repr((event_id,)),  # what apply_async would show: an event id, never personal data
        kwargsrepr="{}",
    )
    _producer().publish(
        body,
        exchange="",
        routing_key=conf.queue,
        headers=headers,
        delivery_mode=conf.delivery_mode,
        retry=conf.retry,
        retry_policy=conf.retry_policy,
        **properties,
    )


def _producer() -> Producer:
    # A producer per thread: a kombu channel is not safe to share between the web server's
    # threads. Per process too: a connection opened before a fork (a worker pool's parent)
    # would be one socket written by two processes, so a child opens its own.
    producer = _publisher.producer
    if producer is None or _publisher.pid != os.getpid():
        connection = bounded_connection()
        conf = _settings()
        producer = Producer(connection, serializer=conf.serializer)
        # The step queue declared once per connection (RabbitMQ drops a message sent to a
        # queue no one declared yet); kombu's ensure() revives the producer on a new connection.
        try:
            producer.maybe_declare(app.amqp.queues[conf.queue], retry=conf.retry, **conf.retry_policy)
        except BaseException:
            connection.release()  # not kept: the next publish opens another
            raise
        _publisher.producer, _publisher.pid = producer, os.getpid()
    return producer


def bounded_connection() -> Connection:
    """A connection to publish on, bounded by NOTIFY_BROKER_PUBLISH_TIMEOUT: to connect, and on Redis
    for every answer (kombu's AMQP transport takes only the connection's timeout).

    A broker that accepts connections and never answers held a publish, and with it a creation's
    request, a worker's step or an admin's save, for ever. Only publishers get it: a worker's
    blocking read of its queue (Celery's own connection for reading) waits on purpose.
    """
    timeout = settings.NOTIFY_BROKER_PUBLISH_TIMEOUT
    bounds = {"socket_timeout": timeout, "socket_connect_timeout": timeout}  # Redis's; AMQP's is connect_timeout
    url = app.conf.broker_write_url or app.conf.broker_url
    # Not for rediss://: kombu reads TLS's default from the scheme's name, which a class replaces.
    transport = _KeptClientTransport if url.startswith("redis://") else None
    connection: Connection = app.connection_for_write(
        connect_timeout=timeout, transport_options=bounds, transport=transport
    )
    return connection


class _KeptClientChannel(kombu_redis.Channel):
    """kombu's Redis channel, putting every message through one client instead of a new one each.

    kombu builds a ``redis.Redis`` for each message it puts, and that constructor copies
    redis-py's whole table of reply callbacks, a visible share of a creation's web CPU. A client
    holds no connection of its own (each command borrows one from the channel's
    pool), so one serves all of its channel's messages; a channel is a connection's, and a
    publishing connection is one thread's (``_producer``).
    """

    @cached_property
    def _kept_client(self) -> redis.Redis:
        client: redis.Redis = self._create_client()  # type: ignore[attr-defined]  # kombu's, missing from its stubs
        return client

    @contextmanager
    def conn_or_acquire(self, client: redis.Redis | None = None) -> Iterator[redis.Redis]:
        yield client or self._kept_client

    def _put(self, queue: str, message: dict[str, Any], **kwargs: Any) -> None:
        """LPUSH ``message`` on this channel's own connection, as kombu's ``_put`` does through a client.

        A command through a ``redis.Redis`` takes a connection from the pool and gives it back,
        under the pool's lock, and records it for redis-py's observability: twice the CPU of the
        command itself on a kept connection. Whatever kombu's ``_put`` does
        besides an LPUSH (a priority's queue, a batch, a queue that expires) stays kombu's.
        """
        expires = self._expires  # type: ignore[attr-defined]  # kombu's, missing from its stubs
        if kwargs.get("_publish_batch") is not None or expires or message["properties"].get("priority"):
            return super()._put(queue, message, **kwargs)
        # kombu passes basic_publish's options (mandatory, immediate, timeout) on; its own _put
        # ignores them too.
        connection = self._kept_connection
        try:
            connection.send_command("LPUSH", queue, dumps(message))  # kombu's JSON, as its own _put
            connection.read_response()
        except BaseException:
            # Whatever the failure, the socket may hold half a command or an unread reply: drop
            # it, so the next publish (kombu's retry, on a revived channel) starts on a new one.
            connection.disconnect()
            raise

    @cached_property
    def _kept_connection(self) -> "_Connection":
        # Taken from the channel's pool and never given back: the channel is one thread's.
        connection: _Connection = self._kept_client.connection_pool.get_connection()
        return connection


class _Connection(Protocol):
    """What the kept connection is asked to do (redis-py's own methods are not annotated)."""

    def send_command(self, *args: object) -> None: ...
    def read_response(self) -> object: ...
    def disconnect(self) -> None: ...


class _KeptClientTransport(kombu_redis.Transport):
    Channel = _KeptClientChannel


def send_task(name: str, *args: object) -> None:
    """Put one task on its queue (routed by name, as Celery routes it) on a bounded connection.

    For the publishes a person or a periodic job waits on (an admin's save, the risk evaluation).
    Raises kombu's ``OperationalError`` if the broker does not take it within the bound.
    """
    with bounded_connection() as connection:
        app.send_task(name, args=list(args), connection=connection)


# AMQP's numbers for the names Celery's setting may use (kombu.entity.DELIVERY_MODES).
_DELIVERY_MODES = {"transient": 1, "persistent": 2}


class _Settings(NamedTuple):
    queue: str
    ignore_result: bool
    serializer: str
    delivery_mode: int
    retry: bool
    retry_policy: dict[str, Any]


@cache
def _settings() -> _Settings:
    """What apply_async would read from Celery's configuration on every publish, read once."""
    conf = app.conf
    return _Settings(
        queue=conf.task_default_queue,  # where notify.advance goes: config.lanes routes only the periodic jobs
        ignore_result=conf.task_ignore_result,
        serializer=conf.task_serializer,
        # Celery's setting may name the mode ("persistent") or give its number (2).
        delivery_mode=_DELIVERY_MODES.get(conf.task_default_delivery_mode, conf.task_default_delivery_mode),
        retry=conf.task_publish_retry,
        retry_policy=dict(conf.task_publish_retry_policy),
    )
