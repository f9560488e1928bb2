"""Logbook's models, one module per domain; importable from here as before. Django registers
them all through this package (app_label logbook), the ones in logbook.models_alerts,
models_learning and models_triage too."""

from logbook.models.checkpoints import Checkpoint, CheckpointRestore
from logbook.models.entries import Annotation, AuditEvent, LogbookEntry
from logbook.models.incidents import IncidentGroup, IncidentSource, Interruption, RootCause
from logbook.models.sdc import SdcReplay
from logbook.models.stragglers import StragglerRecord
from logbook.models.suggestions import TriageSuggestion
from logbook.models.webhooks import WebhookDelivery, WebhookEndpoint
from logbook.models_alerts import AlertFiring, AlertRule
from logbook.models_learning import TriageClassifier
from logbook.models_triage import TriageRule, TriageRuleSetting

__all__ = [
    "AlertFiring", "AlertRule", "Annotation", "AuditEvent", "Checkpoint", "CheckpointRestore",
    "IncidentGroup", "IncidentSource", "Interruption", "LogbookEntry", "RootCause", "SdcReplay",
    "StragglerRecord", "TriageClassifier", "TriageRule", "TriageRuleSetting", "TriageSuggestion",
    "WebhookDelivery", "WebhookEndpoint"
]  # fmt: skip
