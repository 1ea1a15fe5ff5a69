from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from notify.api import api
from runbook.console.logins import LoginView
from runbook.metrics.endpoint import metrics

# Requests Django refuses before any view (a Host it does not serve): the API's error shape on its paths.
handler400 = "notify.api.errors.bad_request"

urlpatterns = [
    path("", include("runbook.urls")),
    # Only log in and out: console accounts are managed by staff in the admin.
    path("accounts/login/", LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/v1/", api.urls),
    path("", include("notify.urls")),
    # django-prometheus's view, behind the bearer token Prometheus is given.
    path("metrics", metrics, name="prometheus-django-metrics"),
]
