from django.urls import path

from telemetry.views import projects

app_name = "telemetry"

urlpatterns = [
    path("projects/<slug:slug>/members/", projects.project_members, name="project-members"),
]
