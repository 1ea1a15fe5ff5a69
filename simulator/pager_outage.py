"""Parse and follow a pager outage: phases one after another from when it was set, then recovery.

Posted to ``/simulator/pager-outage`` as ``{"phases": [{"mode": "timeout", "seconds": 4},
{"mode": "throttle", "seconds": 3, "retry_after": 2}, {"mode": "error", "seconds": 3,
"status": 503}]}``; ``{"phases": []}`` ends any outage now.
"""

from dataclasses import dataclass

from simulator.faults import PagerFault
from simulator.fields import Fields
from simulator.scripts import ScriptError

# Longer than any client's deadline here (PAGER_TIMEOUT is 5 s by default), and short enough
# that a held request never outlives a test.
DEFAULT_HANG_SECONDS = 10.0
DEFAULT_RETRY_AFTER = 1
DEFAULT_ERROR_STATUS = 503


@dataclass(frozen=True)
class Phase:
    """``seconds`` of one behaviour; ``hang_seconds``, ``retry_after`` and ``status`` belong to its mode."""

    mode: PagerFault
    seconds: float
    hang_seconds: float = DEFAULT_HANG_SECONDS
    retry_after: int = DEFAULT_RETRY_AFTER
    status: int = DEFAULT_ERROR_STATUS

    def describe(self) -> str:
        return f"{self.mode}:{self.seconds:g}s"


class Outage:
    """A schedule of phases starting at ``started`` (monotonic seconds)."""

    def __init__(self, phases: tuple[Phase, ...], started: float) -> None:
        self.phases = phases
        self.started = started

    def phase_at(self, now: float) -> Phase | None:
        """Return the phase in force at ``now``, or None once the last one is over (recovered)."""
        end = self.started
        for phase in self.phases:
            end += phase.seconds
            if now < end:
                return phase
        return None


NO_OUTAGE = Outage((), 0.0)


def parse_outage(data: object) -> tuple[Phase, ...]:
    """Validate a posted outage; raise ``ScriptError`` naming the offending field."""
    fields = Fields(data, "", ScriptError)
    raw = fields.pop("phases")
    fields.finish()
    if not isinstance(raw, list):
        raise ScriptError("phases: must be a list")
    return tuple(_phase(Fields(item, f"phases[{index}]", ScriptError)) for index, item in enumerate(raw))


def _phase(fields: Fields) -> Phase:
    mode = fields.choice("mode", PagerFault)
    seconds = fields.positive("seconds")
    match mode:
        case PagerFault.TIMEOUT:
            phase = Phase(mode, seconds, hang_seconds=fields.non_negative("hang_seconds", DEFAULT_HANG_SECONDS))
        case PagerFault.THROTTLE:
            retry_after = fields.non_negative("retry_after", DEFAULT_RETRY_AFTER)
            if retry_after != int(retry_after):
                raise fields.fail("retry_after", f"must be whole seconds, got {retry_after:g}")
            phase = Phase(mode, seconds, retry_after=int(retry_after))
        case PagerFault.ERROR:
            status = fields.number("status", DEFAULT_ERROR_STATUS)
            if status not in range(500, 600):
                raise fields.fail("status", f"must be a 5xx status, got {status:g}")
            phase = Phase(mode, seconds, status=int(status))
    fields.finish()
    return phase
