"""Render Twilio-shaped JSON: Message resources, list pages and errors, as the ``twilio`` client parses them."""

from dataclasses import dataclass
from datetime import datetime
from email.utils import format_datetime
from typing import Any

from aiohttp import web

from simulator.account import API_VERSION
from simulator.messages import SmsMessage
from simulator.state import Redaction


@dataclass(frozen=True)
class TwilioError:
    """A Twilio REST error: HTTP status, Twilio's error code and its message."""

    status: int
    code: int
    message: str

    def response(self) -> web.Response:
        body = {
            "code": self.code,
            "message": self.message,
            "more_info": f"https://www.twilio.com/docs/errors/{self.code}",
            "status": self.status,
        }
        return web.json_response(body, status=self.status)


def message_uri(account_sid: str, sid: str) -> str:
    return f"/{API_VERSION}/Accounts/{account_sid}/Messages/{sid}.json"


_UNREDACTED = Redaction()


def message_resource(
    message: SmsMessage, account_sid: str, now: datetime, redaction: Redaction = _UNREDACTED
) -> dict[str, Any]:
    """Return ``message`` as the API shows it at ``now``, redacted as the account has it set."""
    current = message.current(now)
    date_sent = message.date_sent(now)
    # Twilio shows no body it did not keep (ContentRetention=discard), nor one Message
    # Redaction has removed since the message went out.
    shows_body = message.retains_content and not (redaction.body and date_sent is not None)
    error_code, error_message = current.error or (None, None)
    uri = message_uri(account_sid, message.sid)
    base = uri.removesuffix(".json")
    return {
        "account_sid": account_sid,
        "api_version": API_VERSION,
        "body": message.body if shows_body else "",
        "date_created": _rfc2822(message.created_at),
        "date_sent": _rfc2822(date_sent) if date_sent else None,
        "date_updated": _rfc2822(message.at(current)),
        "direction": "outbound-api",
        "error_code": error_code,
        "error_message": error_message,
        "from": message.from_,
        "messaging_service_sid": message.messaging_service_sid,
        "num_media": "0",
        "num_segments": str(message.num_segments),
        "price": None,
        "price_unit": "USD",
        "sid": message.sid,
        "status": current.status,
        "subresource_uris": {"media": f"{base}/Media.json", "feedback": f"{base}/Feedback.json"},
        "to": mask_number(message.to) if redaction.phone else message.to,
        "uri": uri,
    }


def mask_number(number: str) -> str:
    """Return ``number`` as phone number redaction shows it: its last four digits masked."""
    return number[:-4] + "XXXX" if len(number) > 4 else "XXXX"


def _rfc2822(moment: datetime) -> str:
    # Twilio's v2010 dates: "Wed, 02 Dec 2026 18:00:00 +0000".
    return format_datetime(moment.replace(microsecond=0))
