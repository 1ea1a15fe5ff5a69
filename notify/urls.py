from django.urls import path

from notify import callbacks

urlpatterns = [
    path("callbacks/twilio/sms/<str:event_id>", callbacks.sms_status_callback, name="sms-status-callback"),
]
