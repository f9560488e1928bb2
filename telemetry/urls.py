from django.urls import path

from telemetry import views

app_name = "telemetry"

urlpatterns = [
    path("", views.run_list, name="run-list"),
    path("runs/<int:run_id>/", views.run_detail, name="run-detail"),
]
