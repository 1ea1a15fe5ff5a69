"""Name the one Twilio account the simulator serves."""

from dataclasses import dataclass

API_VERSION = "2010-04-01"


@dataclass(frozen=True)
class Account:
    """The account's sid and token: the token authenticates API calls and signs callbacks."""

    sid: str
    auth_token: str
