"""The planner's view of a DAG: stages, their inputs and their optional declarations."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from airflow_provider_finegrained.planning.enums import Distribution, ExchangeMode, coerce_enum
from airflow_provider_finegrained.planning.resources import ResourceSpec


class StageGraphError(ValueError):
    """A DAG's stage declarations cannot be planned; the message names the stages involved."""


@dataclass(frozen=True)
class StageInput:
    """An exchange from ``upstream`` into a stage; strings are accepted for mode and distribution."""

    upstream: str
    mode: ExchangeMode = ExchangeMode.BLOCKING
    distribution: Distribution = Distribution.ALL_TO_ALL
    name: str | None = None
    """The name the stage code receives this input under (defaults to ``upstream``)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", coerce_enum(ExchangeMode, self.mode, what="exchange mode"))
        object.__setattr__(self, "distribution", coerce_enum(Distribution, self.distribution, what="distribution"))

    @property
    def input_name(self) -> str:
        return self.name or self.upstream


@dataclass(frozen=True)
class StageSpec:
    """One stage as the planner sees it: what it reads and what it declares."""

    name: str
    inputs: tuple[StageInput, ...] = ()
    resources: ResourceSpec | None = None
    parallelism: int | None = None
    """A fixed parallelism; None lets the planner decide from the consumed bytes."""
    min_parallelism: int | None = None
    max_parallelism: int | None = None
    slot_sharing_group: str | None = None
    memory_weight: float = 1.0
    labels: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        name: str,
        inputs: Mapping[str, Mapping[str, str] | str] | None = None,
        **declared: object,
    ) -> StageSpec:
        """Build a spec from plain values, naming the stage in every error.

        ``inputs`` maps an input name to an upstream stage name, or to a mapping with ``upstream``,
        ``mode`` and ``distribution``.
        """
        try:
            parsed = tuple(_parse_input(key, value) for key, value in (inputs or {}).items())
            resources = ResourceSpec.from_value(declared.pop("resources", None))  # type: ignore[arg-type]
            return cls(name=name, inputs=parsed, resources=resources, **declared)  # type: ignore[arg-type]
        except (TypeError, ValueError) as exc:
            raise StageGraphError(f"stage {name!r}: {exc}") from exc


def _parse_input(key: str, value: Mapping[str, str] | str) -> StageInput:
    if isinstance(value, str):
        return StageInput(upstream=value, name=key)
    unknown = set(value) - {"upstream", "mode", "distribution"}
    if unknown or "upstream" not in value:
        raise ValueError(f"input {key!r} needs 'upstream' and optional 'mode', 'distribution'; got {dict(value)}")
    try:
        return StageInput(name=key, **value)  # type: ignore[arg-type]
    except ValueError as exc:
        raise ValueError(f"input {key!r}: {exc}") from exc
