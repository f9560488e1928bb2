"""The evidence model every explanation shares: a finding (an interruption's root cause, a
slowdown's cause) is a ranked list of candidate causes, each with what it names (hosts, ranks,
devices, config keys), a confidence in [0, 1] and the evidence lines that support it.

Pure values, no ORM and no app imports: auto-triage (logbook) and the slowdown pass (diagnosis)
both build these, and the pages and APIs render them the same way. It is the one module of
diagnosis that logbook may import (tests/test_architecture.py), until auto-triage moves here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Evidence:
    """One observation behind a cause, in words an on-call engineer can check, and where it
    came from (a message rule, a DCGM event, rank timings, a config diff...)."""

    source: str
    detail: str
    # How strongly this observation alone supports its cause, in [0, 1].
    weight: float
    host: str | None = None
    device: str | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.weight <= 1.0:
            raise ValueError(f"evidence weight {self.weight} is outside [0, 1]")


@dataclass(frozen=True)
class Cause:
    """One candidate explanation: `kind` is a root-cause category (auto-triage) or a slowdown
    cause kind (straggler, section, config_change, hardware_change, thermal, power, unknown)."""

    kind: str
    detail: str
    confidence: float
    hosts: tuple[str, ...] = ()
    ranks: tuple[int, ...] = ()
    devices: tuple[str, ...] = ()
    config_keys: tuple[str, ...] = ()
    evidence: tuple[Evidence, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if not 0.0 <= self.confidence <= 1.0:
            raise ValueError(f"confidence {self.confidence} is outside [0, 1]")

    def as_dict(self) -> dict[str, object]:
        """The API's shape of a cause (GET /api/v1/runs/<id>/slowdowns and the suggestions)."""
        return {
            "kind": self.kind,
            "detail": self.detail,
            "hosts": list(self.hosts),
            "ranks": list(self.ranks),
            "devices": list(self.devices),
            "config_keys": list(self.config_keys),
            "confidence": round(self.confidence, 4),
            "evidence": [item.detail for item in self.evidence],
        }


def ranked(causes: Iterable[Cause]) -> list[Cause]:
    """Most likely first; ties broken by kind so the order is stable across runs."""
    return sorted(causes, key=lambda cause: (-cause.confidence, cause.kind))


def noisy_or(weights: Sequence[float]) -> float:
    """The chance that at least one of independent supporting observations is right:
    1 - prod(1 - w). Monotone: adding an observation never lowers it."""
    remaining = 1.0
    for weight in weights:
        remaining *= 1.0 - weight
    return 1.0 - remaining
