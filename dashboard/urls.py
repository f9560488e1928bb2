from django.urls import path

from dashboard.views import compare, efficiency, failures, ranks, runs

app_name = "dashboard"

urlpatterns = [
    path("", runs.run_list, name="run-list"),
    path("compare/", compare.compare, name="compare"),
    # The logbook's breakdown with the slowdowns' loss beside it (dashboard.views.failures).
    path("failures/", failures.failure_breakdown, name="failures"),
    path("runs/version/", runs.projects_version, name="projects-version"),
    path("runs/<int:run_id>/", runs.run_detail, name="run-detail"),
    path("runs/<int:run_id>/version/", runs.run_version, name="run-version"),
    path("runs/<int:run_id>/mfu/", efficiency.run_mfu, name="run-mfu"),
    path("runs/<int:run_id>/goodput/", efficiency.run_goodput, name="run-goodput"),
    path("runs/<int:run_id>/ranks/", ranks.run_ranks, name="run-ranks"),
]
