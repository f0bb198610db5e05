"""What a region run reports to its leader's task while it runs: the live Spark UI link, where the region's
results are, and the OpenLineage parent of its application (the run itself writes no XCom)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_provider_finegrained.operators.lineage import parent_job_spark_conf
from airflow_provider_finegrained.operators.links import LiveLink, UITargetsFor
from airflow_provider_finegrained.operators.xcom_writes import push_region_info

__all__ = ["TaskReport"]


@dataclass(frozen=True)
class TaskReport:
    """The leader task's side of a region run (``execution.region_sequence.RunReport``)."""

    context: Mapping[str, Any]

    def live_link(self, ui_links: UITargetsFor) -> LiveLink:
        return LiveLink(self.context["ti"], ui_links)

    def region_info(self, region: str, folder: str, leader: str, try_number: int, stages: Sequence[str]) -> None:
        push_region_info(self.context["ti"], region, folder, leader, try_number, stages)

    def lineage_conf(self, conf: Mapping[str, str]) -> dict[str, str]:
        # Spark's OpenLineage listener (when the user has it) links its events to the leader's task.
        return parent_job_spark_conf(self.context, conf)
