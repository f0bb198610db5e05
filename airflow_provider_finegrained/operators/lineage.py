"""OpenLineage for stages: input and output datasets, the sizing decision as a run facet, parent job info.

Optional: everything here is a no-op unless ``apache-airflow-providers-openlineage`` is installed
(``pip install airflow-provider-finegrained[openlineage]``). Its listener calls
:meth:`LineageMixin.get_openlineage_facets_on_complete` after a stage succeeds; the datasets come from
what the stage really read and wrote (the output records in XCom), named by OpenLineage's naming rules,
so a stage's output dataset is the next stage's input dataset. A stage's output is one logical dataset
across runs (the default layout's run and try folders left out of its name); where one run wrote it is
in the dataset's ``finegrained_location`` and ``version`` facets. Cold regions also carry the parent job
information in their Spark settings when ``[openlineage] spark_inject_parent_job_info`` is on, as the
Spark provider's operators do, so Spark's own OpenLineage listener links its events to the Airflow task.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow_provider_finegrained.contract import OUTPUT_KEY, TRACE_KEY

if TYPE_CHECKING:
    from airflow_provider_finegrained.dags.declaration import ExternalDataset
    from airflow_provider_finegrained.planning import StageSpec

__all__ = [
    "LineageMixin",
    "dataset_naming",
    "decision_facet_fields",
    "logical_location",
    "parent_job_spark_conf",
    "stage_lineage",
]

_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://([^/]*)(/.*)?$")
_SAME_AS = {"s3a": "s3", "s3n": "s3", "gcs": "gs"}
_TRY_FOLDER = re.compile(r"try=\d+")


def dataset_naming(location: str) -> tuple[str, str]:
    """OpenLineage's (namespace, name) for a storage location.

    Local paths and ``file://`` URLs: ``("file", "/abs/path")``; an object store or HDFS:
    ``("<scheme>://<authority>", "<path without leading slash>")``, with Hadoop's ``s3a``/``s3n`` named
    ``s3`` as Spark's OpenLineage listener names them. Trailing slashes are dropped.
    """
    match = _SCHEME.match(location)
    if match is None:
        return "file", location.rstrip("/") or "/"
    scheme = _SAME_AS.get(match.group(1).lower(), match.group(1).lower())
    path = (match.group(3) or "/").rstrip("/")
    if scheme == "file":
        return "file", path or "/"
    return f"{scheme}://{match.group(2)}", path.lstrip("/") or "/"


def logical_location(location: str, stage: str) -> str:
    """The location of ``stage``'s output as a dataset that stays the same from run to run.

    The default layout ``<root>/<dag>/<run>/<stage>/try=<n>`` becomes ``<root>/<dag>/<stage>``: its run and
    try folders name one run's copy, not the dataset. Any other location (a fixed ``output_path``, which
    may hold no try folder) is its own logical dataset.
    """
    from airflow_provider_finegrained.storage.locations import sanitize_component

    parts = location.rstrip("/").split("/")
    try:
        folder = sanitize_component(stage, "stage_id")
    except ValueError:
        return location
    if len(parts) >= 4 and _TRY_FOLDER.fullmatch(parts[-1]) and parts[-2] == folder:
        return "/".join([*parts[:-3], folder])
    return location


def decision_facet_fields(trace: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of a stage's decision trace the run facet carries (camelCase, as facets are)."""
    return {
        "stage": str(trace.get("stage", "")),
        "region": str(trace.get("region", "")),
        "parallelism": int(trace.get("parallelism") or 0),
        "decidedParallelism": int(trace.get("decided_parallelism") or 0),
        "rule": str(trace.get("rule", "")),
        "executors": int(trace.get("executors") or 0),
        "executorCores": int(trace.get("executor_cores") or 0),
        "executorMemoryBytes": int(trace.get("executor_memory") or 0),
        "memoryFraction": float(trace.get("memory_fraction") or 0.0),
        "consumedBytes": {str(k): int(v) for k, v in dict(trace.get("consumed_bytes") or {}).items()},
        "executionMode": str(dict(trace.get("execution") or {}).get("mode", "")),
        "applicationId": trace.get("application_id"),
    }


def stage_lineage(
    external: Mapping[str, str],
    upstream: Mapping[str, Mapping[str, Any]],
    output: Mapping[str, Any] | None,
    trace: Mapping[str, Any] | None,
) -> Any:
    """An ``OperatorLineage`` for one stage.

    ``external``: input name to location of each ExternalDataset; ``upstream``: input name to the
    upstream stage's output record (XCom); ``output``: this stage's record; ``trace``: its decision trace.
    An output handed over in memory only is no dataset.
    """
    from airflow.providers.common.compat.openlineage.facet import (
        Dataset,
        OutputDataset,
        OutputStatisticsOutputDatasetFacet,
    )
    from airflow.providers.openlineage.extractors import OperatorLineage

    inputs = [Dataset(*dataset_naming(location)) for location in external.values()]
    inputs += [
        Dataset(*dataset_naming(_logical(record)), facets=_location_facets(record))
        for record in upstream.values()
        if record.get("committed", True) and not record.get("in_memory_only") and record.get("path")
    ]
    outputs = []
    if output and output.get("path") and not output.get("in_memory_only"):
        statistics = OutputStatisticsOutputDatasetFacet(
            rowCount=int(output.get("rows") or 0), size=int(output.get("total_bytes") or 0)
        )
        namespace, name = dataset_naming(_logical(output))
        outputs.append(
            OutputDataset(
                namespace, name, facets=_location_facets(output), outputFacets={"outputStatistics": statistics}
            )
        )
    run_facets = {"finegrained_decision": _decision_facet(trace)} if trace else {}
    return OperatorLineage(inputs=inputs, outputs=outputs, run_facets=run_facets)


def _logical(record: Mapping[str, Any]) -> str:
    return logical_location(str(record["path"]), str(record.get("stage") or ""))


def _location_facets(record: Mapping[str, Any]) -> dict[str, Any]:
    """Where this run's copy of a stage's output is: ``finegrained_location`` and the standard ``version``."""
    from attrs import define
    from openlineage.client.facet_v2 import DatasetFacet, dataset_version_dataset

    @define
    class FineGrainedLocationDatasetFacet(DatasetFacet):
        """One run's copy of the dataset: its location (OpenLineage's naming and as recorded), the committed
        attempt's files and the try that committed them."""

        namespace: str
        name: str
        location: str
        dataPath: str
        tryNumber: int

    location = str(record["path"])
    namespace, name = dataset_naming(location)
    return {
        "finegrained_location": FineGrainedLocationDatasetFacet(
            namespace=namespace,
            name=name,
            location=location,
            dataPath=str(record.get("data_path") or ""),
            tryNumber=int(record.get("try_number") or 0),
        ),
        "version": dataset_version_dataset.DatasetVersionDatasetFacet(datasetVersion=name),
    }


def _decision_facet(trace: Mapping[str, Any]) -> Any:
    from attrs import define
    from openlineage.client.facet_v2 import RunFacet

    @define
    class FineGrainedDecisionRunFacet(RunFacet):
        """How the provider sized the stage: parallelism and the rule, executors, memory (camelCase, as facets are)."""

        stage: str
        region: str
        parallelism: int
        decidedParallelism: int
        rule: str
        executors: int
        executorCores: int
        executorMemoryBytes: int
        memoryFraction: float
        consumedBytes: dict[str, int]
        executionMode: str
        applicationId: str | None

    return FineGrainedDecisionRunFacet(**decision_facet_fields(trace))


def parent_job_spark_conf(context: Mapping[str, Any], conf: Mapping[str, str]) -> dict[str, str]:
    """The ``spark.openlineage.parent*`` settings for a cold region's application, as the Spark provider
    injects them; empty without the OpenLineage provider, with OpenLineage disabled, with
    ``[openlineage] spark_inject_parent_job_info`` off, or when ``conf`` already has parent settings."""
    try:
        from airflow.providers.openlineage import conf as ol_conf
        from airflow.providers.openlineage.utils.spark import inject_parent_job_information_into_spark_properties
    except ImportError:
        return {}
    if ol_conf.is_disabled() or not ol_conf.spark_inject_parent_job_info():
        return {}
    injected = inject_parent_job_information_into_spark_properties(dict(conf), context)  # type: ignore[arg-type]
    return {str(k): str(v) for k, v in injected.items() if k not in conf}


class LineageMixin:
    """``get_openlineage_facets_on_complete`` for a stage operator (what OpenLineage's listener calls).

    The stage records what it read and wrote while it runs (:meth:`remember_lineage`, from ``execute``):
    OpenLineage's listener calls the method in a forked process by default, where the task's channel
    to Airflow (XCom reads) is not to be used.
    """

    task_id: str
    stage_spec: StageSpec
    external_inputs: dict[str, ExternalDataset]
    _lineage_records: tuple[dict[str, Mapping[str, Any]], Mapping[str, Any] | None, Mapping[str, Any] | None]

    def remember_lineage(self, task_instance: Any, output: Mapping[str, Any], trace: Mapping[str, Any]) -> None:
        """Record the upstream outputs this stage read, its own output and its trace, for OpenLineage."""
        upstream: dict[str, Mapping[str, Any]] = {}
        for stage_input in self.stage_spec.inputs:
            record = task_instance.xcom_pull(task_ids=stage_input.upstream, key=OUTPUT_KEY)
            if isinstance(record, Mapping):
                upstream[stage_input.name or stage_input.upstream] = record
        self._lineage_records = (upstream, output, trace)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """The stage's datasets and decision: what it really read and wrote."""
        if not hasattr(self, "_lineage_records"):  # e.g. a stage that published nothing
            self.remember_lineage(
                task_instance,
                task_instance.xcom_pull(task_ids=self.task_id, key=OUTPUT_KEY),
                task_instance.xcom_pull(task_ids=self.task_id, key=TRACE_KEY),
            )
        upstream, output, trace = self._lineage_records
        return stage_lineage(
            {name: dataset.path for name, dataset in self.external_inputs.items()},
            upstream,
            output if isinstance(output, Mapping) else None,
            trace if isinstance(trace, Mapping) else None,
        )
