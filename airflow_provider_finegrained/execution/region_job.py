"""What a region's driver runs: the region job (each stage's inputs, session settings, output, code) and the
application's Spark settings. No Airflow imports; pyspark's cloudpickle is imported only to pickle callables.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from airflow_provider_finegrained.execution.executor_lifecycle import executor_lifecycle_conf, starts_on_every_executor
from airflow_provider_finegrained.execution.region_folder import RegionFolder
from airflow_provider_finegrained.execution.region_run import RegionDecision, StageInputs
from airflow_provider_finegrained.execution.spark_reach import scans_of, stage_session_conf
from airflow_provider_finegrained.planning import DagPlan, Distribution, ParallelismConfig, RegionSizing
from airflow_provider_finegrained.planning.balance import InputBalance, decide_adaptive, producer_row_group_bytes
from airflow_provider_finegrained.runtime.job import InputRef, RegionJob, StageJob
from airflow_provider_finegrained.secrets import REDACTION_REGEX_CONF, spark_redaction_regex

if TYPE_CHECKING:
    from airflow_provider_finegrained.settings import ConnectionSettings


class StageTaskLike(Protocol):
    """What the run reads of a stage task (``SparkStageOperator``)."""

    @property
    def task_id(self) -> str: ...
    @property
    def external_inputs(self) -> Mapping[str, Any]: ...
    @property
    def python_callable(self) -> Callable[..., Any] | None: ...
    @property
    def application(self) -> str | None: ...
    @property
    def application_args(self) -> Sequence[Any]: ...
    @property
    def op_kwargs(self) -> Mapping[str, Any]: ...
    @property
    def spark_conf(self) -> Mapping[str, Any]: ...
    @property
    def output_path(self) -> str | None: ...
    @property
    def output_format(self) -> str: ...

    def render_template_fields(self, context: Any) -> None: ...


def build_region_job(
    plan: DagPlan,
    region: str,
    tasks: Mapping[str, StageTaskLike],
    decision: RegionDecision,
    inputs: Mapping[str, StageInputs],
    folder: RegionFolder,
    settings: ConnectionSettings,
    config_for: Callable[[str], ParallelismConfig],
) -> RegionJob:
    """The region job of the decided region, its callables pickled into the region folder."""
    # pyspark's cloudpickle without pyspark's 0.6-3 s of imports on the task's path (vendored_cloudpickle)
    from airflow_provider_finegrained.spark import vendored_cloudpickle as cloudpickle

    members = list(plan.regions[region])
    stages = []
    for member in members:
        task = tasks[member]
        refs = []
        for exchange in plan.stages[member].inputs:
            broadcast = exchange.distribution is Distribution.BROADCAST
            if exchange.producer in members:
                refs.append(InputRef(exchange.input_name, "stage", stage=exchange.producer, broadcast=broadcast))
            else:
                record = inputs[member].upstream[exchange.input_name]
                refs.append(
                    InputRef(
                        exchange.input_name, "committed", path=record.path, format=record.format, broadcast=broadcast
                    )
                )
        for name, dataset in task.external_inputs.items():
            refs.append(
                InputRef(
                    name,
                    "external",
                    path=dataset.path,
                    format=dataset.format,
                    options=dict(dataset.options),
                    broadcast=dataset.broadcast,
                )
            )
        callable_path = None
        if task.python_callable is not None:
            callable_path = folder.write_callable(member, _pickle_by_value(cloudpickle, task.python_callable))
        needs_output = bool(decision.outside_consumers[member]) or not decision.in_region_consumers[member]
        stages.append(
            StageJob(
                name=member,
                inputs=refs,
                session_conf={
                    **stage_session_conf(decision, member),
                    **adaptive_conf(
                        settings.adaptive_query_execution,
                        config_for(member),
                        decision.sizing.stages[scans_of(decision, member)].balance,
                        decision.sizing.stages[member].coalesce_floor,
                    ),
                    **{k: str(v) for k, v in task.spark_conf.items() if k.startswith("spark.sql.")},
                },
                output_location=(
                    folder.output_location(member, task.output_path) if needs_output or task.output_path else None
                ),
                output_format=task.output_format,
                write_options=write_options(
                    task.output_format,
                    [config_for(c) for c in decision.outside_consumers[member]] or [config_for(member)],
                ),
                callable_path=callable_path,
                application=task.application,
                application_args=[str(a) for a in task.application_args],
                kwargs=dict(task.op_kwargs),
                handover=bool(decision.in_region_consumers[member]),
            )
        )
    return RegionJob(
        region, folder.dag_id, folder.run_id, folder.try_number, settings.storage_root, folder.path, stages
    )


def adaptive_conf(
    enabled: bool, config: ParallelismConfig, balance: InputBalance | None = None, min_partitions: int = 1
) -> dict[str, str]:
    """A stage's AQE settings: off, or on as an in-query correction towards the planned bytes per task.

    ``balance``: the stage's scanned files (``StageSizing.balance``); with skewed input the advisory size
    and skew threshold go below the bytes per task (``planning.balance.decide_adaptive``).
    ``min_partitions``: the fewest partitions AQE may coalesce a shuffle into (``StageSizing.coalesce_floor``,
    the memory floor), set on every stage so that no stage inherits another's in a shared session.
    """
    if not enabled:
        return {"spark.sql.adaptive.enabled": "false"}
    # The decided parallelism is an upper bound that AQE may coalesce towards the same bytes per task when
    # filters leave less data than planned; a hot key's partition is split towards that size too (Spark's
    # skew thresholds, 5x the median and 256 MiB, never fire on partitions sized at a few MiB).
    return {
        "spark.sql.adaptive.enabled": "true",
        "spark.sql.adaptive.coalescePartitions.parallelismFirst": "false",
        "spark.sql.adaptive.coalescePartitions.minPartitionNum": str(max(1, min_partitions)),
        **decide_adaptive(config.avg_bytes_per_task, balance).session_conf(),
    }


def write_options(output_format: str, consumer_configs: Sequence[ParallelismConfig]) -> dict[str, str]:
    """A producer's writer options: parquet row groups small enough for its consumers' splits to cut.

    Spark gives a parquet row group to the split holding its midpoint, so a file written as one 128 MiB
    row group is read by one task however small the consumers' splits are.
    """
    if output_format != "parquet" or not consumer_configs:
        return {}
    smallest = min(c.avg_bytes_per_task for c in consumer_configs)
    return {"parquet.block.size": str(producer_row_group_bytes(smallest))}


def application_conf(
    sizing: RegionSizing,
    settings: ConnectionSettings,
    launcher_conf: Mapping[str, str],
    stage_confs: Iterable[Mapping[str, Any]],
    storage_conf: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The application's Spark settings: sizing, executors' lifecycle (dynamic allocation bounded by the
    decision and the minimum resources), the launcher's, the storage's, the connection's, the stages'.

    Later sources win: a connection's or a stage's ``spark_conf`` overrides the launcher's defaults and the
    ``spark.hadoop.*`` settings made from ``storage_conn_id``'s credentials (``storage_conf``).
    """
    conf = {
        "spark.ui.showConsoleProgress": "false",
        # Spark's UI, event log and logs mask what the provider's rule calls secret, not only what Spark's
        # default regex does (it shows spark.executorEnv.API_KEY); the user's own regex wins (set later).
        REDACTION_REGEX_CONF: spark_redaction_regex(),
        **sizing.application_conf(),
        **executor_lifecycle_conf(settings.resource_bounds(), sizing, settings.executors_from == "start"),
    }
    if not sizing.local:
        # Local mode sizes the driver as the executors; elsewhere the driver keeps the connection's size.
        conf["spark.driver.memory"] = f"{settings.driver_memory // 2**20}m"
    conf.update(launcher_conf)
    conf.update(storage_conf or {})
    conf.update({k: str(v) for k, v in settings.spark_conf.items()})
    for stage_conf in stage_confs:
        conf.update({k: str(v) for k, v in stage_conf.items() if not k.startswith("spark.sql.")})
    if not sizing.local and starts_on_every_executor(conf):
        # Even spread (FLIP-370), where every executor is asked for at the start (a fixed count): start the
        # first tasks only once all have registered; Spark's default starts on the first one, which then
        # takes the first wave almost alone. Not with executors asked for at the first job: standalone
        # would wait for all of spark.cores.max before the driver even runs. Explicit settings win.
        conf = {
            "spark.scheduler.minRegisteredResourcesRatio": "1.0",
            "spark.scheduler.maxRegisteredResourcesWaitingTime": "60s",
            **conf,
        }
    return conf


def _pickle_by_value(cloudpickle: Any, fn: Callable[..., Any]) -> bytes:
    """Pickle ``fn`` with the code of its module, so the driver needs no access to the DAG folder."""
    module = sys.modules.get(getattr(fn, "__module__", "") or "")
    by_value = module is not None and _is_user_module(module)
    if by_value:
        cloudpickle.register_pickle_by_value(module)
    try:
        data: bytes = cloudpickle.dumps(fn)
        return data
    finally:
        if by_value:
            cloudpickle.unregister_pickle_by_value(module)


def _is_user_module(module: ModuleType) -> bool:
    path = getattr(module, "__file__", None) or ""
    return bool(path) and "site-packages" not in path and not path.startswith(os.path.dirname(os.__file__))
