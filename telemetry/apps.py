from typing import Any

from django.apps import AppConfig
from django.db.backends.signals import connection_created


def _binding_check(sender: Any, connection: Any, **kwargs: Any) -> None:
    from config.prepared import binding_check

    binding_check(connection.connection)


class TelemetryConfig(AppConfig):
    name = "telemetry"
    verbose_name = "Telemetry: runs, attempts, metrics, topology"

    def ready(self) -> None:
        # The DCGM push's prepared statements (config.prepared) need client-side binding:
        # a server-side-binding connection fails at its start, with the fix in the message,
        # not at the first push.
        connection_created.connect(_binding_check, dispatch_uid="chronicle-binding-check")
