"""The values of logbook's choice fields, in a module without models: the ingest contract
validates against them without importing any model, and the models use the same classes."""

from __future__ import annotations

from django.db import models


class CheckpointTier(models.TextChoices):
    PEER_HBM = "peer_hbm", "Peer HBM"
    HOST_RAM = "host_ram", "Host RAM"
    LOCAL_NVME = "local_nvme", "Local NVMe"
    OBJECT_STORE = "object_store", "Object store"
    SHARED_FS = "shared_fs", "Shared filesystem"
    UNKNOWN = "unknown", "Unknown"


class CheckpointStatus(models.TextChoices):
    SAVED = "saved", "Saved"
    FAILED = "failed", "Failed"
    CORRUPT = "corrupt", "Corrupt"
    DELETED = "deleted", "Deleted"


class SdcDetection(models.TextChoices):
    LOSS_SPIKE = "loss_spike", "Loss spike"
    GRAD_NORM_SPIKE = "grad_norm_spike", "Grad-norm spike"
    CHECKSUM_MISMATCH = "checksum_mismatch", "Cross-replica checksum mismatch"
    ATTEMPT_DIVERGENCE = "attempt_divergence", "Attempt-vs-attempt divergence"
    SCANNER = "scanner", "Scanner on an idle machine"
    OTHER = "other", "Other"


class LogbookEntryKind(models.TextChoices):
    NOTE = "note", "Note"
    RESTART = "restart", "Restart"
    HARDWARE = "hardware", "Hardware"
    LOSS_SPIKE = "loss_spike", "Loss spike"
    HANG = "hang", "Hang"
    CONFIG_CHANGE = "config_change", "Config change"
    ANALYSIS = "analysis", "Analysis"
    DEBRIEF = "debrief", "Debrief"
    MILESTONE = "milestone", "Milestone"
    # Nodes swapped out and in, spares (buffer hosts) brought in, the cluster resized.
    HARDWARE_SWAP = "hardware_swap", "Hardware swap"


class TimePrecision(models.TextChoices):
    """How well a chronicle knows when something happened: to the minute or second, to a
    day only, or within a window (start and end)."""

    EXACT = "exact", "Exact"
    DAY = "day", "Day"
    WINDOW = "window", "Window"
