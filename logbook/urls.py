from django.urls import path

from logbook.views import fleet, sdc  # sdc and fleet (helper 3)
from logbook.views import logbook as logbook_views  # logbook (issue 4)
from logbook.views import taxonomy as taxonomy_views
from logbook.views.checkpoints import run_checkpoints  # (helper 2)
from logbook.views.failures import failure_breakdown  # (helper 2)
from logbook.views.incidents import incident_detail, incident_queue  # (issue 4)
from logbook.views.webhooks import project_webhooks, webhooks_index  # (issue 4)

app_name = "logbook"

urlpatterns: list = []

# --- sdc and fleet (helper 3) ---
urlpatterns += [
    path("sdc/", sdc.sdc_ledger, name="sdc"),
    path("fleet/", fleet.fleet_health, name="fleet"),
    path("fleet/hosts/<str:name>/", fleet.host_detail, name="host-detail"),
]
# --- end sdc and fleet (helper 3) ---

# --- failures and checkpoints (helper 2) ---
urlpatterns += [
    path("failures/", failure_breakdown, name="failures"),
    path("runs/<int:run_id>/checkpoints/", run_checkpoints, name="run-checkpoints"),
]
# --- end failures and checkpoints (helper 2) ---

# --- incidents (issue 4) ---
urlpatterns += [
    path("incidents/", incident_queue, name="incidents"),
    path("incidents/<int:pk>/", incident_detail, name="incident-detail"),
]
# --- end incidents (issue 4) ---

# --- annotations and webhooks (issue 4) ---
urlpatterns += [
    path("webhooks/", webhooks_index, name="webhooks-index"),
    path("projects/<slug:slug>/webhooks/", project_webhooks, name="webhooks"),
]
# --- end annotations and webhooks (issue 4) ---

# --- logbook (issue 4) ---
urlpatterns += [
    path("runs/<int:run_id>/logbook/", logbook_views.run_logbook, name="run-logbook"),
    path(
        "runs/<int:run_id>/logbook/<int:pk>/edit/",
        logbook_views.logbook_entry_edit,
        name="run-logbook-entry-edit",
    ),
    path("runs/<int:run_id>/logbook.md", logbook_views.logbook_export, name="run-logbook-export"),
    path(
        "runs/<int:run_id>/logbook/import/",
        logbook_views.logbook_import,
        name="run-logbook-import",
    ),
]
# --- end logbook (issue 4) ---

urlpatterns += [path("taxonomy/", taxonomy_views.taxonomy, name="taxonomy")]
