from django.apps import AppConfig


class DashboardConfig(AppConfig):
    name = "dashboard"
    verbose_name = "Dashboard: run pages that join telemetry with the logbook"
