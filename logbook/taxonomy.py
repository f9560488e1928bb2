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
