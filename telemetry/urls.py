from django.urls import path

from telemetry.views import display, projects

app_name = "telemetry"

urlpatterns = [
    path("settings/time-zone/", display.time_zone_set, name="time-zone"),
    path("projects/<slug:slug>/members/", projects.project_members, name="project-members"),
]
