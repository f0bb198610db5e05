"""What a region's driver runs: the region job (each stage's inputs, session settings, output, code) and the
application's Spark settings. No Airflow imports; pyspark's cloudpickle is imported only to pickle callables.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from airflow_provider_finegrained.execution.decision import RegionDecision, StageInputs
from airflow_provider_finegrained.execution.executor_lifecycle import starts_on_every_executor
from airflow_provider_finegrained.execution.region_folder import RegionFolder
from airflow_provider_finegrained.planning import DagPlan, Distribution
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
) -> RegionJob:
    """The region job of the decided region, its callables pickled into the region folder: each stage runs with
    its decision's session settings and writer options, unchanged."""
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
                session_conf=decision.session_conf(member),
                output_location=(
                    folder.output_location(member, task.output_path) if needs_output or task.output_path else None
                ),
                output_format=task.output_format,
                write_options=dict(decision.stages[member].write_options),
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


def application_conf(
    decision: RegionDecision,
    settings: ConnectionSettings,
    launcher_conf: Mapping[str, str],
    stage_confs: Iterable[Mapping[str, Any]],
    storage_conf: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The application's Spark settings: the decision's (sizing, executors' lifecycle: dynamic allocation bounded
    by the decision and the minimum resources), the launcher's, the storage's, the connection's, the stages'.

    Later sources win: a connection's or a stage's ``spark_conf`` overrides the launcher's defaults and the
    ``spark.hadoop.*`` settings made from ``storage_conn_id``'s credentials (``storage_conf``).
    """
    conf = {
        "spark.ui.showConsoleProgress": "false",
        # Spark's UI, event log and logs mask what the provider's rule calls secret, not only what Spark's
        # default regex does (it shows spark.executorEnv.API_KEY); the user's own regex wins (set later).
        REDACTION_REGEX_CONF: spark_redaction_regex(),
        **decision.application_conf,
    }
    sizing = decision.sizing
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
