"""Exchange modes and distribution patterns between stages, accepted as enums or their string values."""

from __future__ import annotations

from enum import StrEnum
from typing import TypeVar

_E = TypeVar("_E", bound=StrEnum)


class ExchangeMode(StrEnum):
    """How a stage hands its output to a consumer."""

    BLOCKING = "blocking"
    """Materialized under the storage root and sized in XCom; the consumer runs later."""
    PIPELINED = "pipelined"
    """Producer and consumer run in one Spark application; data is handed over in memory."""


class Distribution(StrEnum):
    """How a consumer's tasks read the producer's partitions."""

    ALL_TO_ALL = "all_to_all"
    """The consumer repartitions (a shuffle)."""
    FORWARD = "forward"
    """Partition i feeds task i: producer and consumer share one parallelism."""
    BROADCAST = "broadcast"
    """The (small) producer output is sent whole to every consumer task."""


def coerce_enum(enum_type: type[_E], value: _E | str, *, what: str | None = None) -> _E:
    """Return ``value`` as ``enum_type``, accepting the enum's string values (case-insensitive)."""
    if isinstance(value, enum_type):
        return value
    if isinstance(value, str):
        try:
            return enum_type(value.strip().lower())
        except ValueError:
            pass
    allowed = ", ".join(repr(m.value) for m in enum_type)
    label = what or enum_type.__name__
    raise ValueError(f"unknown {label} {value!r}; allowed values: {allowed}")
