"""Email through Django's email framework over SMTP.

SMTP has no lookup: a connection lost after the final ``.`` of DATA but before the
server's reply may or may not have delivered (RFC 1047). Such a loss is reported
as ``UnknownOutcome`` and the policy decides whether to resubmit (same Message-ID).
"""

import contextlib
import smtplib

from django.core.mail import BadHeaderError, EmailMessage, get_connection

from notify.states import Normalized
from notify.transports.base import PermanentError, Receipt, TransientError, UnknownOutcome


class SmtpEmail:
    def send(self, message: EmailMessage) -> Receipt:
        connection = get_connection(fail_silently=False)
        try:
            connection.open()
        except (OSError, smtplib.SMTPException) as error:
            # Not connected, or refused before any mail command: nothing was handed over.
            raise TransientError("connect_failed", type(error).__name__) from None
        try:
            sent = connection.send_messages([message])
        except (ValueError, BadHeaderError):
            # A malformed address or header: no retry can fix it. The error's own text
            # quotes the address, so it goes no further.
            raise PermanentError("invalid_message") from None
        except smtplib.SMTPResponseException as error:
            if not 400 <= error.smtp_code < 600:
                # smtplib's code -1: a reply it could not read, possibly after DATA was taken.
                raise UnknownOutcome("unreadable_reply") from None
            # The server answered: a 4xx reply defers, a 5xx reply refuses.
            raw = f"smtp_{error.smtp_code}"
            raise (TransientError(raw) if error.smtp_code < 500 else PermanentError(raw)) from None
        except smtplib.SMTPRecipientsRefused as error:
            codes = [code for code, _ in error.recipients.values()]
            raise (TransientError if all(code < 500 for code in codes) else PermanentError)(
                f"smtp_{max(codes)}"
            ) from None
        except (OSError, smtplib.SMTPException) as error:
            # Lost mid-conversation: the message may have been accepted.
            raise UnknownOutcome("connection_lost", type(error).__name__) from None
        finally:
            with contextlib.suppress(OSError, smtplib.SMTPException):
                connection.close()
        if sent != 1:
            # Django sends nothing, and says so only by this count, for a message without recipients.
            raise PermanentError("no_recipients")
        return Receipt(Normalized.ACCEPTED, "smtp_250")
