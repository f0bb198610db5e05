"""The variants compared, one entry each: adding a variant is adding a row to ``VARIANTS``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal

Runner = Literal["spark_submit", "provider"]


@dataclass(frozen=True)
class Variant:
    """How one variant runs the pipeline.

    ``spark_submit`` variants run ``stage_app.py`` with plain spark-submit: one application per stage
    (``per_stage_apps``) or the whole pipeline in one; ``conf`` is passed as ``--conf``; ``oracle`` sets
    each stage's shuffle partitions from the hand-tuned table. ``provider`` variants run the example DAG
    with ``airflow dags test``: ``blocking`` turns its pipelined exchanges blocking; ``env`` is added to
    Airflow's environment (``AIRFLOW__FINEGRAINED__*`` options of the embedded default connection).
    """

    key: str
    label: str
    runner: Runner
    conf: dict[str, str] = field(default_factory=dict)
    per_stage_apps: bool = True
    oracle: bool = False
    blocking: bool = False
    env: dict[str, str] = field(default_factory=dict)
    warm: bool = False
    """Regions run on the provider's warm pool, which outlives a run: measured by difference, stopped at the end."""


_COLD: Final = {"AIRFLOW__FINEGRAINED__WARM_POOL": "off"}
_FIXED: Final = {"spark.sql.shuffle.partitions": "200", "spark.sql.adaptive.enabled": "false"}

VARIANTS: Final[dict[str, Variant]] = {
    v.key: v
    for v in (
        Variant("a", "fixed (200 partitions, AQE off)", "spark_submit", conf=dict(_FIXED)),
        Variant(
            "b",
            "fixed + AQE",
            "spark_submit",
            conf={"spark.sql.shuffle.partitions": "200", "spark.sql.adaptive.enabled": "true"},
        ),
        # Cold: a spark-submit per region (the embedded default runs warm unless told otherwise).
        Variant("c", "provider, cold", "provider", env=dict(_COLD)),
        Variant("d", "provider, cold, separate apps", "provider", blocking=True, env=dict(_COLD)),
        Variant(
            "oracle",
            "oracle (one app, hand-tuned)",
            "spark_submit",
            conf={"spark.sql.adaptive.enabled": "false"},
            per_stage_apps=False,
            oracle=True,
        ),
        # Warm mode, the embedded default's: regions run on a long-lived Spark Connect server, started before the
        # runs and kept running.
        Variant("e", "provider, warm", "provider", env={"AIRFLOW__FINEGRAINED__WARM_POOL": "auto"}, warm=True),
    )
}
BASELINE: Final = "a"
ORACLE: Final = "oracle"


def select(keys: list[str] | None) -> list[Variant]:
    """The variants named, in the order named (the run order), or all of them; unknown names are an error."""
    if not keys:
        return list(VARIANTS.values())
    unknown = [k for k in keys if k not in VARIANTS]
    if unknown:
        raise ValueError(f"unknown variant(s) {', '.join(unknown)}; known: {', '.join(VARIANTS)}")
    return [VARIANTS[k] for k in dict.fromkeys(keys)]
