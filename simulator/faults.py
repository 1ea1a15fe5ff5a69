"""Name the behaviours a simulated provider can show, one enum per protocol step."""

from enum import StrEnum


class CreateFault(StrEnum):
    """What the Messages API does with one create call."""

    ACCEPT = "accept"
    REJECT = "reject"
    RATE_LIMITED = "rate_limited"
    SERVER_ERROR = "server_error"
    ACCEPT_THEN_500 = "accept_then_500"
    ACCEPT_THEN_DROP = "accept_then_drop"
    HANG = "hang"
    # Slow processing: the message is created only ``hang_seconds`` after the request came
    # in (invisible to lists until then), and the answer waits for it: past a client's timeout.
    ACCEPT_LATE = "accept_late"

    @property
    def accepts(self) -> bool:
        """Return whether the message is stored and counted, whatever the client then sees."""
        return self not in {CreateFault.REJECT, CreateFault.RATE_LIMITED, CreateFault.SERVER_ERROR}


class CallbackFault(StrEnum):
    """How the status callbacks of one message reach its StatusCallback URL."""

    NORMAL = "normal"
    DROP = "drop"
    DUPLICATE = "duplicate"
    REORDER = "reorder"
    DELAY = "delay"


class SmtpFault(StrEnum):
    """What the SMTP sink answers to one message's DATA."""

    ACCEPT = "accept"
    TEMP_FAIL = "temp_fail"
    PERM_FAIL = "perm_fail"
    DROP_AFTER_DATA = "drop_after_data"
    HANG = "hang"

    @property
    def accepts(self) -> bool:
        """Return whether the message is counted, whatever the client then sees."""
        return self not in {SmtpFault.TEMP_FAIL, SmtpFault.PERM_FAIL}


class FinalStatus(StrEnum):
    """How an accepted SMS ends, as drawn from a region's outcome weights."""

    DELIVERED = "delivered"
    UNDELIVERED = "undelivered"
    FAILED = "failed"
    NO_RECEIPT = "no_receipt"


class PagerFault(StrEnum):
    """What the pager's endpoint does during one phase of an outage."""

    # Held without an answer past any client's deadline, then dropped: the message is not
    # taken, as a load balancer in front of a pager that is down would do.
    TIMEOUT = "timeout"
    THROTTLE = "throttle"  # 429 with Retry-After
    ERROR = "error"  # a 5xx
