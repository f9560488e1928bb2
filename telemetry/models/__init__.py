"""Telemetry's models, one module per domain; importable from here as before."""

from telemetry.models.device_health import (
    DeviceEvent,
    DeviceHealthState,
    DeviceSample,
    DeviceSampleSummary,
)
from telemetry.models.hardware import AcceleratorType, Cluster, Device, Host, Site
from telemetry.models.metrics import (
    MetricHourSum,
    MetricPoint,
    MetricRollup,
    MetricSeries,
    StepStart,
    StepStartChunk,
    ThroughputSum,
)
from telemetry.models.projects import Membership, Project, SsoIdentity
from telemetry.models.ranks import (
    RankBucket,
    RankPlacement,
    RankStepBlock,
    RankStepStats,
    RealField,
)
from telemetry.models.runs import Attempt, JobInterval, Run, _default_deterministic_metrics

__all__ = [
    "AcceleratorType", "Attempt", "Cluster", "Device", "DeviceEvent", "DeviceHealthState",
    "DeviceSample", "DeviceSampleSummary", "Host", "JobInterval", "Membership", "MetricHourSum",
    "MetricPoint",
    "MetricRollup", "MetricSeries", "Project", "RankBucket", "RankPlacement", "RankStepBlock",
    "RankStepStats", "RealField", "Run", "Site", "SsoIdentity", "StepStart", "StepStartChunk",
    "ThroughputSum", "_default_deterministic_metrics"
]  # fmt: skip
