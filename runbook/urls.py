from django.urls import path

from runbook import actions, views

app_name = "runbook"

urlpatterns = [
    path("", views.event_list, name="events"),
    path("follow-ups", views.follow_ups, name="follow-ups"),
    path("pages", views.page_review, name="page-review"),
    path("events/<str:event_id>", views.event_detail, name="event"),
    path("events/<str:event_id>/raw", views.raw_statuses, name="raw-statuses"),
    path("events/<str:event_id>/release-lease", actions.release_lease, name="release-lease"),
    path("events/<str:event_id>/claim-fallback", actions.claim_fallback, name="claim-fallback"),
    path("events/<str:event_id>/follow-up", actions.follow_up, name="follow-up"),
]
