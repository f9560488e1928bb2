"""The root-cause taxonomy Chronicle ships with: the 18 components of the Llama 3 paper's
Table 5 (with their groups) plus the categories operators need beyond it. The seeding data
migration and the tests read this list; admins extend the table afterwards.

Each row: (slug, component shown to users, group, is_hardware, is_planned). is_hardware
follows the paper's grouping: its "about 78%" hardware share is the GPU, Host and Network
groups (324 / 419 = 77.3%); unplanned host maintenance is not a hardware fault.
"""

from __future__ import annotations

from typing import NamedTuple


class RootCauseSeed(NamedTuple):
    slug: str
    name: str
    group: str
    is_hardware: bool
    is_planned: bool


UNKNOWN_SLUG = "unknown"

TABLE5_COMPONENTS: list[RootCauseSeed] = [
    RootCauseSeed("faulty-gpu", "Faulty GPU", "GPU", True, False),
    RootCauseSeed("gpu-hbm3-memory", "GPU HBM3 Memory", "GPU", True, False),
    RootCauseSeed("software-bug", "Software Bug", "Dependency", False, False),
    RootCauseSeed("network-switch-cable", "Network Switch/Cable", "Network", True, False),
    # Not hardware: the paper's "about 78%" hardware share is GPU + Host + Network (77.3%).
    RootCauseSeed("host-maintenance", "Host Maintenance", "Unplanned Maintenance", False, False),
    RootCauseSeed("gpu-sram-memory", "GPU SRAM Memory", "GPU", True, False),
    RootCauseSeed("gpu-system-processor", "GPU System Processor", "GPU", True, False),
    RootCauseSeed("nic", "NIC", "Host", True, False),
    RootCauseSeed("nccl-watchdog-timeout", "NCCL Watchdog Timeouts", "Unknown", False, False),
    RootCauseSeed("silent-data-corruption", "Silent Data Corruption", "GPU", True, False),
    RootCauseSeed(
        "gpu-thermal-interface-sensor", "GPU Thermal Interface + Sensor", "GPU", True, False
    ),
    RootCauseSeed("ssd", "SSD", "Host", True, False),
    RootCauseSeed("power-supply", "Power Supply", "Host", True, False),
    RootCauseSeed("server-chassis", "Server Chassis", "Host", True, False),
    RootCauseSeed("io-expansion-board", "IO Expansion Board", "Host", True, False),
    RootCauseSeed("dependency", "Dependency", "Dependency", False, False),
    RootCauseSeed("cpu", "CPU", "Host", True, False),
    RootCauseSeed("system-memory", "System Memory", "Host", True, False),
]

EXTRA_CATEGORIES: list[RootCauseSeed] = [
    RootCauseSeed("planned-maintenance", "Planned Maintenance", "Planned", False, True),
    RootCauseSeed("config-change", "Config or Dataset Change", "Planned", False, True),
    RootCauseSeed("loss-divergence", "Loss Divergence", "Training", False, False),
    RootCauseSeed("data-pipeline", "Data Pipeline", "Software", False, False),
    RootCauseSeed("storage", "Storage", "Storage", False, False),
    RootCauseSeed("scheduler-preemption", "Scheduler Preemption", "Scheduler", False, False),
    RootCauseSeed(UNKNOWN_SLUG, "Unknown, under investigation", "Unknown", False, False),
]

ROOT_CAUSE_SEEDS: list[RootCauseSeed] = TABLE5_COMPONENTS + EXTRA_CATEGORIES

# Families of causes (auto-triage weighs evidence per family and culprit: logbook
# .triage_combine): the GPU's own faults, the host's, the network's, software, the job's data
# and config, and symptoms that say *that* the job stopped, not why. Seeded into
# RootCause.family (logbook migration 0019); a category admins add names its own.
FAMILY_GPU = "gpu"
FAMILY_HOST = "host"
FAMILY_NETWORK = "network"
FAMILY_SOFTWARE = "software"
FAMILY_JOB = "job"
FAMILY_SYMPTOM = "symptom"
FAMILIES: list[tuple[str, str]] = [
    (FAMILY_GPU, "The GPU's own faults"),
    (FAMILY_HOST, "The host's faults"),
    (FAMILY_NETWORK, "The network's faults"),
    (FAMILY_SOFTWARE, "Software"),
    (FAMILY_JOB, "The job's data, config and operations"),
    (FAMILY_SYMPTOM, "Symptoms (a stall nobody explained)"),
]
FAMILY_OF: dict[str, str] = {
    "faulty-gpu": FAMILY_GPU,
    "gpu-hbm3-memory": FAMILY_GPU,
    "gpu-sram-memory": FAMILY_GPU,
    "gpu-system-processor": FAMILY_GPU,
    "silent-data-corruption": FAMILY_GPU,
    "gpu-thermal-interface-sensor": FAMILY_GPU,
    "ssd": FAMILY_HOST,
    "power-supply": FAMILY_HOST,
    "server-chassis": FAMILY_HOST,
    "io-expansion-board": FAMILY_HOST,
    "cpu": FAMILY_HOST,
    "system-memory": FAMILY_HOST,
    "host-maintenance": FAMILY_HOST,
    "network-switch-cable": FAMILY_NETWORK,
    "nic": FAMILY_NETWORK,
    "software-bug": FAMILY_SOFTWARE,
    "dependency": FAMILY_SOFTWARE,
    "planned-maintenance": FAMILY_JOB,
    "config-change": FAMILY_JOB,
    "loss-divergence": FAMILY_JOB,
    "data-pipeline": FAMILY_JOB,
    "storage": FAMILY_JOB,
    "scheduler-preemption": FAMILY_JOB,
    "nccl-watchdog-timeout": FAMILY_SYMPTOM,
    UNKNOWN_SLUG: FAMILY_SYMPTOM,
}
