from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

from notify.api import api

urlpatterns = [
    # Until the on-call console has its own list, the open events are in the admin.
    path("", RedirectView.as_view(url="/admin/notify/event/", permanent=False)),
    path("admin/", admin.site.urls),
    path("api/v1/", api.urls),
    path("", include("notify.urls")),
    path("", include("django_prometheus.urls")),
]
