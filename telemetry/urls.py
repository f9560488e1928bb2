from django.urls import path

from telemetry.views import runs

app_name = "telemetry"

urlpatterns = [
    path("", runs.run_list, name="run-list"),
    path("runs/<int:run_id>/", runs.run_detail, name="run-detail"),
]
