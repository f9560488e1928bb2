from django.urls import path

from logbook.views import fleet, sdc  # sdc and fleet (helper 3)
from logbook.views.checkpoints import run_checkpoints  # (helper 2)
from logbook.views.failures import failure_breakdown  # (helper 2)

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
