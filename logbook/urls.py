from django.urls import URLPattern, path

from logbook.views import fleet, sdc
from logbook.views import logbook as logbook_views
from logbook.views import taxonomy as taxonomy_views
from logbook.views.alerts import project_alert_rules
from logbook.views.checkpoints import run_checkpoints
from logbook.views.incidents import incident_detail, incident_queue
from logbook.views.triage_accuracy import triage_accuracy
from logbook.views.triage_rules import project_triage_rules
from logbook.views.webhooks import project_webhooks, webhooks_index

app_name = "logbook"

urlpatterns: list[URLPattern] = [
    path("sdc/", sdc.sdc_ledger, name="sdc"),
    path("fleet/", fleet.fleet_health, name="fleet"),
    # path, not str: a host named before names were checked may hold a slash (rack/h1).
    path("fleet/hosts/<path:name>/", fleet.host_detail, name="host-detail"),
    path("runs/<int:run_id>/checkpoints/", run_checkpoints, name="run-checkpoints"),
    path("incidents/", incident_queue, name="incidents"),
    path("incidents/<int:pk>/", incident_detail, name="incident-detail"),
    path("incidents/accuracy/", triage_accuracy, name="triage-accuracy"),
    path("webhooks/", webhooks_index, name="webhooks-index"),
    path("projects/<slug:slug>/webhooks/", project_webhooks, name="webhooks"),
    path("projects/<slug:slug>/alerts/", project_alert_rules, name="alert-rules"),
    path("projects/<slug:slug>/triage/", project_triage_rules, name="triage-rules"),
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
    path("taxonomy/", taxonomy_views.taxonomy, name="taxonomy"),
]
