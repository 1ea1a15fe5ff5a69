"""Email through Django's email framework over SMTP, the whole exchange under one deadline.

Each worker thread keeps its SMTP connection between sends: a new one costs a TCP
handshake, the greeting, EHLO (and STARTTLS, AUTH) and QUIT, several round trips and most
of an email step's CPU. A kept connection is checked with NOOP before use, under a short
bound of its own inside the send's deadline (a relay that closed it or stopped answering
must not use up the time for the send), and replaced on any doubt. It is dropped after
any failure: whatever state a failed exchange left it in is not worth knowing.

SMTP has no lookup: a connection lost after the final ``.`` of DATA but before the
server's reply may or may not have delivered (RFC 1047). Such a loss is reported as
``UnknownOutcome`` and the policy decides whether to resubmit (same Message-ID). A loss
before that dot hands nothing over (a server takes a message only at its final dot): it is
a ``TransientError``, retried without a doubt about duplicates.
"""

import contextlib
import smtplib
import socket
import threading
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.mail import BadHeaderError, EmailMessage
from django.core.mail.backends.smtp import EmailBackend

from notify.rules.vocabulary import Normalized
from notify.transports.base import ConfigurationError, PermanentError, Receipt, TransientError, UnknownOutcome
from plumbing.deadline import Deadline

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

# What smtplib sends last for a message: the body's end, then the lone dot that hands it over.
_FINAL_DOT = b"\r\n.\r\n"


# How long a kept connection may take to answer NOOP before it is replaced by a new one; at
# most this share of the send's deadline, so the send keeps most of its time.
KEPT_CHECK_SECONDS = 0.5
KEPT_CHECK_SHARE = 0.25


class _DeadlineSMTP(smtplib.SMTP):
    """smtplib's client whose every step waits at most until the deadline."""

    def __init__(self, deadline: Deadline, *args: Any, **kwargs: Any) -> None:
        self.deadline = deadline
        # Whether the message's final dot was (perhaps partly) sent: from then on a lost
        # connection may have delivered it.
        self.final_dot_sent = False
        super().__init__(*args, **kwargs)

    def connect(self, host: str = "localhost", port: int = 0, source_address: Any = None) -> tuple[int, bytes]:
        # Watched from before the socket exists: the greeting, however many lines it dribbles,
        # is cut at the deadline like every later reply.
        self.deadline.watch(lambda: self.sock)
        return super().connect(host, port, source_address)

    def _get_socket(self, host: str, port: int, timeout: float) -> socket.socket:
        # The relay's name is looked up here, under the deadline; TLS still checks the name.
        address = self.deadline.resolve(host, port)
        sock: socket.socket = super()._get_socket(address, port, self.deadline.clip(timeout))  # type: ignore[misc]
        return sock

    def send(self, s: "ReadableBuffer | str") -> None:
        if self.sock is not None:
            self.sock.settimeout(self.deadline.clip(self.timeout))
        if isinstance(s, bytes) and s.endswith(_FINAL_DOT):
            self.final_dot_sent = True
        super().send(s)

    def getreply(self) -> tuple[int, bytes]:
        if self.sock is not None:
            self.sock.settimeout(self.deadline.clip(self.timeout))
        return super().getreply()


class _DeadlineSMTPSSL(_DeadlineSMTP, smtplib.SMTP_SSL):
    """The same over implicit TLS (EMAIL_USE_SSL)."""


class _DeadlineBackend(EmailBackend):
    """Django's SMTP backend on the deadline client, naming itself from settings in EHLO."""

    def __init__(self, deadline: Deadline) -> None:
        super().__init__(fail_silently=False)
        self.deadline = deadline

    def reuse(self, deadline: Deadline) -> bool:
        """Take up the kept connection under a new send's ``deadline``; False if it does not answer NOOP in time."""
        connection = self.connection
        if not isinstance(connection, _DeadlineSMTP):
            return False
        self.deadline = connection.deadline = deadline
        deadline.watch(lambda: connection.sock)  # the NOOP's reply too, however slowly it comes
        connection.final_dot_sent = False
        patience = connection.timeout
        connection.timeout = min(KEPT_CHECK_SECONDS, deadline.remaining() * KEPT_CHECK_SHARE)
        try:
            code, _ = connection.noop()
        except (OSError, smtplib.SMTPException):
            return False
        finally:
            connection.timeout = patience
        return code == 250

    def open(self) -> bool:
        if self.connection is not None:
            return False
        # Django's own open() first asks DNS for this host's FQDN, a lookup nothing bounds.
        client = _DeadlineSMTPSSL if self.use_ssl else _DeadlineSMTP
        params: dict[str, Any] = {"local_hostname": settings.EMAIL_LOCAL_HOSTNAME, "timeout": self.timeout}
        if self.use_ssl:
            params["context"] = self.ssl_context  # type: ignore[attr-defined]  # Django's, missing from its stubs
        self.connection = client(self.deadline, self.host, self.port, **params)
        if not self.use_ssl and self.use_tls:
            self.connection.starttls(context=self.ssl_context)  # type: ignore[attr-defined]
        if self.username and self.password:
            self.connection.login(self.username, self.password)
        return True


class SmtpEmail:
    def __init__(self) -> None:
        # One kept connection per thread: a threads pool's workers must not share one exchange.
        self._kept = threading.local()

    def send(self, message: EmailMessage, *, within: timedelta) -> Receipt:
        # The deadline starts before anything else: the check of a kept connection, or the
        # connection, its greeting, EHLO, STARTTLS and AUTH, then the message, all inside it.
        # The connection is watched by its client (``_DeadlineSMTP``), cut whichever step it is in.
        deadline = Deadline(within)
        backend: _DeadlineBackend | None = None
        sent = False
        try:
            backend = self._backend(deadline)
            receipt = self._send(backend, message)
            sent = True
            return receipt
        finally:
            deadline.stop_watching()
            self._kept.backend = backend if sent else None
            if backend is not None and not sent:
                _close(backend)

    def _backend(self, deadline: Deadline) -> _DeadlineBackend:
        """The kept connection if it still answers in time, else a backend that will open a new one."""
        kept: _DeadlineBackend | None = getattr(self._kept, "backend", None)
        self._kept.backend = None
        if kept is not None:
            if kept.reuse(deadline):
                return kept
            _close(kept)
        return _DeadlineBackend(deadline)

    def _send(self, backend: _DeadlineBackend, message: EmailMessage) -> Receipt:
        try:
            backend.open()
        except smtplib.SMTPAuthenticationError as error:
            # The relay refuses our credentials: every email fails alike until they are fixed.
            raise ConfigurationError(f"smtp_{error.smtp_code}") from None
        except (OSError, smtplib.SMTPException) as error:
            # Not connected, or refused before any mail command: nothing was handed over.
            raise TransientError("connect_failed", type(error).__name__) from None
        try:
            sent = backend.send_messages([message])
        except (ValueError, BadHeaderError):
            # A malformed address or header: no retry can fix it. The error's own text
            # quotes the address, so it goes no further.
            raise PermanentError("invalid_message") from None
        except smtplib.SMTPResponseException as error:
            if not 400 <= error.smtp_code < 600:
                # smtplib's code -1: a reply it could not read, possibly after DATA was taken.
                raise _lost(backend, "unreadable_reply") from None
            # The server answered: a 4xx reply defers, a 5xx reply refuses.
            raw = f"smtp_{error.smtp_code}"
            raise (TransientError(raw) if error.smtp_code < 500 else PermanentError(raw)) from None
        except smtplib.SMTPRecipientsRefused as error:
            codes = [code for code, _ in error.recipients.values()]
            raise (TransientError if all(code < 500 for code in codes) else PermanentError)(
                f"smtp_{max(codes)}"
            ) from None
        except (OSError, smtplib.SMTPException) as error:
            raise _lost(backend, "connection_lost", type(error).__name__) from None
        if sent != 1:
            # Django sends nothing, and says so only by this count, for a message without recipients.
            raise PermanentError("no_recipients")
        return Receipt(Normalized.ACCEPTED, "smtp_250")


def _close(backend: _DeadlineBackend) -> None:
    with contextlib.suppress(OSError, smtplib.SMTPException):
        backend.close()


def _lost(backend: _DeadlineBackend, raw_status: str, detail: str = "") -> Exception:
    """The connection failed mid-conversation: unknown once the final dot went out, else nothing was sent."""
    connection = backend.connection
    if isinstance(connection, _DeadlineSMTP) and connection.final_dot_sent:
        return UnknownOutcome(raw_status, detail)
    return TransientError(f"{raw_status}_before_data", detail)
