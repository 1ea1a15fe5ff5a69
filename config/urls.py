from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("", include("notify.urls")),
    path("", include("django_prometheus.urls")),
]
