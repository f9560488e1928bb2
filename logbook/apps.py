from django.apps import AppConfig


class LogbookConfig(AppConfig):
    name = "logbook"
    verbose_name = "Logbook: interruptions, checkpoints, SDC, entries"
