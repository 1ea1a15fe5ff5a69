from django.urls import path, register_converter

from runbook.console import actions, views


class EventIdConverter:
    """A path segment that can name a row of the event table: anything but a NUL byte.

    PostgreSQL answers a NUL in text with an error, not a miss: such a path matches no page
    and is 404 before any view looks it up. Not the shape of ``new_event_id`` (as the API
    and the search require): these links are made from the table's own rows, every one of
    which must reverse (the console benchmark seeds ids of its own).
    """

    regex = r"[^/\x00]+"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(EventIdConverter, "event_id")

app_name = "runbook"

urlpatterns = [
    path("", views.event_list, name="events"),
    path("follow-ups", views.follow_ups, name="follow-ups"),
    path("pages", views.page_review, name="page-review"),
    path("events/<event_id:event_id>", views.event_detail, name="event"),
    path("events/<event_id:event_id>/raw", views.raw_statuses, name="raw-statuses"),
    path("events/<event_id:event_id>/release-lease", actions.release_expired_lease, name="release-lease"),
    path("events/<event_id:event_id>/claim-fallback", actions.claim_fallback, name="claim-fallback"),
    path("events/<event_id:event_id>/follow-up", actions.follow_up, name="follow-up"),
]
