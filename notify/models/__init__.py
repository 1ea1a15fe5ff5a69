from notify.models.claim import Claim, claim_key
from notify.models.event import Event, is_event_id, new_event_id
from notify.models.host_clock import HostClock
from notify.models.observation import Observation
from notify.models.service_token import ServiceToken
from notify.models.tally import Tally, TallyWatermark
from notify.models.transition import Transition
from notify.models.vault import VaultEntry

__all__ = [
    "Claim",
    "Event",
    "HostClock",
    "Observation",
    "ServiceToken",
    "Tally",
    "TallyWatermark",
    "Transition",
    "VaultEntry",
    "claim_key",
    "is_event_id",
    "new_event_id",
]
