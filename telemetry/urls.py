from django.urls import path

# --- efficiency (helper) ---
from telemetry.views import efficiency as efficiency_views

# --- end efficiency (helper) ---
from telemetry.views import projects, runs

app_name = "telemetry"

urlpatterns = [
    path("", runs.run_list, name="run-list"),
    path("runs/<int:run_id>/", runs.run_detail, name="run-detail"),
    path("projects/<slug:slug>/members/", projects.project_members, name="project-members"),
    # --- efficiency (helper) ---
    path("runs/<int:run_id>/mfu/", efficiency_views.run_mfu, name="run-mfu"),
    path("runs/<int:run_id>/goodput/", efficiency_views.run_goodput, name="run-goodput"),
    # --- end efficiency (helper) ---
]
